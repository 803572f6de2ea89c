"""The engine refuses to start when the model ignores the KV cache it is given.

transformers 5.17 took the cache as ``past_key_values`` and swallowed ``cache=`` into
``**kwargs``: decoding ran without context and the engine reported log-probs nats off. The
start-up check compares one cached decode step with a full forward pass.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.hf_compat import (  # noqa: E402
    cache_keyword,
    cache_kwargs,
    installed_keyword,
    output_cache,
)
from rltune.engine.transformers_engine import TransformersEngine, load_tokenizer  # noqa: E402
from rltune.sdk.errors import DependencyError, RltuneError  # noqa: E402


def load(path, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype), load_tokenizer(path)


class DropsCache(torch.nn.Module):
    """A causal LM that throws the cache away and runs uncached, as transformers 5.17 did
    with ``cache=``: no error, every step without its context."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.config = lm.config
        self.generation_config = lm.generation_config

    def forward(self, **kwargs):
        kwargs.pop("cache", None)
        kwargs.pop("past_key_values", None)
        kwargs["use_cache"] = False
        return self.lm(**kwargs)


class OldKeyword(torch.nn.Module):
    """A causal LM whose forward takes the cache as ``past_key_values`` (transformers <= 5.17)
    and swallows anything else, like ``cache=``, into ``**kwargs``."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.config = lm.config
        self.generation_config = lm.generation_config

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        use_cache=None,
        logits_to_keep=0,
        **kwargs,
    ):
        return self.lm(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
            **cache_kwargs(self.lm, past_key_values),
        )


@pytest.mark.parametrize("fixture", ["tiny_model_dir", "random_model_dir"])
async def test_guard_passes_on_a_model_that_uses_its_cache(request, fixture):
    model, tok = load(request.getfixturevalue(fixture))
    engine = TransformersEngine(model, tok, threads=1)
    try:
        assert engine.check_kv_cache() < 1e-4
    finally:
        await engine.close()


async def test_guard_passes_in_bf16(tiny_model_dir):
    model, tok = load(tiny_model_dir, torch.bfloat16)
    engine = TransformersEngine(model, tok, threads=1)
    await engine.close()


def test_a_model_that_drops_the_cache_is_refused_at_start(random_model_dir):
    model, tok = load(random_model_dir)
    with pytest.raises(DependencyError) as info:
        TransformersEngine(DropsCache(model), tok, threads=1)
    err = info.value
    assert isinstance(err, RltuneError)
    text = str(err)
    assert "KV-cache check failed" in text
    assert "max abs diff" in text
    assert "kept 0 of 5 prefilled tokens" in text
    assert f"transformers {transformers.__version__}" in text
    assert "install a supported transformers version" in err.hint
    assert "pip install 'transformers>=" in err.hint
    gap = float(text.split("disagree by ")[1].split(" ")[0])
    assert gap > 1e-2  # whole nats in practice, not rounding


async def test_a_model_that_takes_past_key_values_gets_the_cache(random_model_dir):
    """The helper reads the keyword off the forward signature, so the old name works too."""
    model, tok = load(random_model_dir)
    old = OldKeyword(model)
    assert cache_keyword(old) == "past_key_values"
    assert cache_keyword(model) == installed_keyword()
    engine = TransformersEngine(old, tok, threads=1)
    try:
        assert engine.check_kv_cache() < 1e-4
        ids = tok.encode("What is 12 + 30?")
        [res] = await engine.generate(
            GenerationRequest(prompt_ids=ids, sampling=SamplingParams(max_tokens=8, seed=0))
        )
        c = res.completions[0]
        full = torch.tensor([ids + c.completion_ids])
        with torch.no_grad():
            lp = torch.log_softmax(model(full).logits.float(), dim=-1)[0]
        ref = [lp[len(ids) - 1 + i, t].item() for i, t in enumerate(c.completion_ids)]
        assert max(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)) < 1e-4
    finally:
        await engine.close()


def test_cache_helpers_find_the_keyword_through_wrappers(random_model_dir):
    model, _ = load(random_model_dir)
    kw = installed_keyword()
    assert kw in ("cache", "past_key_values")
    # The causal LM, a wrapper with only **kwargs (looked through), the decoder inside.
    assert cache_kwargs(model, "c") == {kw: "c"}
    assert cache_keyword(DropsCache(model)) == kw
    assert cache_keyword(model.model) == kw
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
    cache = output_cache(out)
    assert cache is not None and cache.get_seq_length() == 3

    class Old:
        past_key_values = "old"

    assert output_cache(Old()) == "old"
    assert output_cache(object()) is None
