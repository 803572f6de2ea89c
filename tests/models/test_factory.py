"""Model shapes, saving in Hugging Face format and offline loading."""

from __future__ import annotations

import json

import pytest

from rltune.models import SHAPES, build_model, build_tiny_model, load_tokenizer, read_meta
from rltune.sdk.errors import ValidationError


def test_tiny_dir_loads_offline_bit_identical(tiny_model_dir, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    fresh, _ = build_tiny_model(seed=0)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    for (name, a), b in zip(fresh.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    meta = read_meta(tiny_model_dir)
    assert meta["size"] == "tiny" and 50_000 < meta["parameters"] < 200_000
    assert json.loads((tiny_model_dir / "generation_config.json").read_text())["pad_token_id"] == 3


def test_tiny_model_generates_with_chat_template(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    batch = tok.apply_chat_template(
        [[{"role": "user", "content": "What is 1 + 2?"}], [{"role": "user", "content": "Hi"}]],
        add_generation_prompt=True,
        padding=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape == (2, batch["input_ids"].shape[1] + 5)
    assert batch["attention_mask"][1, 0] == 0  # left padding


@pytest.mark.parametrize(("size", "lo", "hi"), [("nano", 0.6e6, 1.2e6), ("small", 3.5e6, 5e6)])
def test_sizes_have_the_advertised_parameter_counts(size, lo, hi):
    from transformers import Qwen2Config

    _, tok = build_tiny_model()
    s = SHAPES[size]
    # count without allocating the small model: parameters of a meta-device build
    import torch

    with torch.device("meta"):
        model = build_model(size, tok)
    assert isinstance(model.config, Qwen2Config)
    assert lo < sum(p.numel() for p in model.parameters()) < hi
    assert model.config.hidden_size == s.hidden and model.config.tie_word_embeddings


def test_unknown_size_is_a_clear_error():
    _, tok = build_tiny_model()
    with pytest.raises(ValidationError, match="unknown model size 'huge'"):
        build_model("huge", tok)
