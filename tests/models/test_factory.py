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


def test_a_lookback_layer_at_gain_0_keeps_the_model_and_its_heads_look_1_and_2_back(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from rltune.models.factory import save_model, with_lookback_layer

    model, tok = build_tiny_model(seed=0)
    text = "Start with 36. Add 22, then multiply by 54, then add 16. " * 2
    ids = torch.tensor([tok.encode(text)])
    grown = with_lookback_layer(model, gain=0.0)
    assert grown.config.num_hidden_layers == model.config.num_hidden_layers + 1
    with torch.no_grad():
        assert torch.allclose(grown(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5)
    # the old layers carry over one index down; the new first layer's heads attend 1 and 2 back
    old_mlp, new_mlp = model.model.layers[0].mlp, grown.model.layers[1].mlp
    assert torch.equal(new_mlp.up_proj.weight, old_mlp.up_proj.weight)
    grown.config._attn_implementation = "eager"
    with torch.no_grad():
        attn = grown(input_ids=ids, output_attentions=True).attentions[0][0]
    positions = torch.arange(5, ids.shape[1])
    for head, back in enumerate((1, 2, 1, 2)):
        looked = attn[head, positions].argmax(-1)
        assert torch.equal(looked, positions - back), head
        assert attn[head, positions, positions - back].min() > 0.9
    # it saves and loads like any model (one more layer)
    path = save_model(with_lookback_layer(model, gain=0.05), tok, tmp_path / "grown")
    assert AutoModelForCausalLM.from_pretrained(path).config.num_hidden_layers == 3
