"""The prefix KV cache: the radix tree itself, then an engine whose later turns prefill only
their new tokens and still report the log-probs of a fresh forward."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from logprob_reference import fresh_logprobs  # noqa: E402
from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.prefixcache import (  # noqa: E402
    ENV_VAR,
    PREFIX_CACHE_MB,
    PrefixCache,
    default_cache_bytes,
)
from rltune.engine.transformers_engine import TransformersEngine  # noqa: E402
from rltune.sdk.errors import ConfigError  # noqa: E402

#: bytes of one token's KV in these unit tests: 2 tensors x 1 x 1 x 2 floats
TOKEN = 2 * 2 * 4


def kv(ids):
    """A recognisable KV run: each token's key and value hold its id."""
    t = torch.tensor(ids, dtype=torch.float32).view(1, 1, -1, 1).expand(1, 1, -1, 2)
    return [(t.clone(), t.clone() + 0.5)]


def held(layers):
    return [int(x) for x in layers[0][0][0, 0, :, 0].tolist()]


def test_lookup_finds_the_longest_cached_prefix_across_split_edges():
    cache = PrefixCache(max_bytes=1 << 20)
    cache.insert([1, 2, 3, 4, 5], kv([1, 2, 3, 4, 5]), version=0)
    cache.insert([1, 2, 3, 7], kv([1, 2, 3, 7]), version=0)  # splits the edge after 3
    assert cache.tokens == 6 and cache.bytes == 6 * TOKEN
    n, layers = cache.lookup([1, 2, 3, 7, 8], version=0)
    assert n == 4 and held(layers) == [1, 2, 3, 7]
    assert torch.equal(layers[0][1], layers[0][0] + 0.5)  # values kept beside their keys
    n, layers = cache.lookup([1, 2, 3, 4, 9], version=0)  # partly into an edge
    assert n == 4 and held(layers) == [1, 2, 3, 4]
    assert cache.lookup([1, 2, 3, 4, 5], version=0, limit=4)[0] == 4
    assert cache.lookup([9, 1], version=0) == (0, [])
    assert cache.stats["lookups"] == 4 and cache.stats["hits"] == 3
    # the returned KV is a copy: changing it leaves the cache as it was
    layers[0][0].zero_()
    assert held(cache.lookup([1, 2, 3, 4], version=0)[1]) == [1, 2, 3, 4]


def test_the_cache_holds_one_weight_version():
    cache = PrefixCache(max_bytes=1 << 20)
    cache.insert([1, 2, 3], kv([1, 2, 3]), version=0)
    assert cache.lookup([1, 2, 3], version=1)[0] == 0  # other weights: a miss
    cache.insert([4, 5], kv([4, 5]), version=1)  # newer weights: the old KV goes
    assert cache.lookup([1, 2, 3], version=0)[0] == 0 and cache.tokens == 2
    cache.insert([1, 2, 3], kv([1, 2, 3]), version=0)  # older weights: not kept
    assert cache.tokens == 2 and cache.version == 1
    cache.clear(2)
    assert (cache.tokens, cache.bytes, cache.version) == (0, 0, 2)
    assert cache.stats["invalidations"] == 2


def test_the_bound_evicts_the_least_recently_used_leaves():
    cache = PrefixCache(max_bytes=10 * TOKEN)
    cache.insert([1, 2, 3, 4], kv([1, 2, 3, 4]), version=0)
    cache.insert([1, 2, 5, 6], kv([1, 2, 5, 6]), version=0)  # 6 tokens: [1 2] [3 4] [5 6]
    cache.lookup([1, 2, 3, 4], version=0)  # [3 4] is now the more recently used leaf
    cache.insert([8, 9, 10, 11], kv([8, 9, 10, 11]), version=0)  # 10 tokens: fits
    assert cache.stats["evictions"] == 0 and cache.bytes == 10 * TOKEN
    cache.insert([12, 13], kv([12, 13]), version=0)  # 12 tokens: the oldest leaf goes
    assert cache.bytes <= cache.max_bytes and cache.stats["evictions"] == 1
    assert cache.lookup([1, 2, 5, 6], version=0)[0] == 2  # its shared [1 2] stays
    assert cache.lookup([1, 2, 3, 4], version=0)[0] == 4
    assert cache.lookup([12, 13], version=0)[0] == 2
    # one sequence bigger than the whole bound is not kept at all
    cache.insert(list(range(100, 120)), kv(list(range(100, 120))), version=0)
    assert cache.bytes <= cache.max_bytes and cache.lookup([100], version=0)[0] == 0


def test_a_zero_bound_keeps_nothing_and_the_env_var_sets_the_default(monkeypatch):
    off = PrefixCache(max_bytes=0)
    off.insert([1, 2], kv([1, 2]), version=0)
    assert off.tokens == 0 and off.lookup([1, 2], version=0)[0] == 0
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert default_cache_bytes() == PREFIX_CACHE_MB << 20
    monkeypatch.setenv(ENV_VAR, "0.5")
    assert PrefixCache().max_bytes == 1 << 19
    monkeypatch.setenv(ENV_VAR, "lots")
    with pytest.raises(ConfigError, match=ENV_VAR):
        PrefixCache()
    with pytest.raises(ConfigError, match="prefix_cache_bytes"):
        PrefixCache(max_bytes=-1)


# -- the engine -----------------------------------------------------------------------------

SYSTEM = ("You are a careful assistant. Use the calculator tool for arithmetic and end with "
          "the answer. ")


def req(ids, **kw):
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**kw))


def gap(model, prompt, completion) -> float:
    ref = fresh_logprobs(model, prompt, completion.completion_ids)
    return max(abs(a - b) for a, b in zip(ref, completion.logprobs, strict=True))


@pytest.fixture
async def engine(random_model_dir):
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=1, admit_window_s=0)
    yield eng
    await eng.close()


async def test_each_turn_prefills_only_its_new_tokens_and_stays_exact(engine):
    tok = engine.tokenizer
    prompt = tok.encode(SYSTEM + "What is 12 + 30?")
    kept = 0
    for turn in range(3):  # an episode: each prompt extends the last prompt and completion
        before = dict(engine.stats)
        res = await engine.generate_one(req(prompt, max_tokens=8, min_tokens=8, seed=turn))
        c = res.completions[0]
        computed = engine.stats["prefill_tokens"] - before["prefill_tokens"]
        if turn:  # the cache held everything but the tool result (and the last sampled token)
            assert computed == len(prompt) - kept
        assert engine.stats["prompt_tokens"] - before["prompt_tokens"] == len(prompt)
        assert gap(engine.model, prompt, c) < 1e-4
        kept = len(prompt) + len(c.completion_ids) - 1
        prompt = prompt + c.completion_ids + tok.encode(f" tool: {turn + 42}. Next?")
    assert engine.prefix_cache.stats["hits"] >= 2
    stats = engine.prefix_cache_stats()
    assert stats["tokens"] == kept and stats["bytes"] > 0 and stats["evictions"] == 0


async def test_later_copies_of_a_prompt_prefill_one_token(engine):
    prompt = engine.tokenizer.encode(SYSTEM + "What is 7 * 6?")
    await engine.generate_one(req(prompt, max_tokens=2, seed=0))
    before = engine.stats["prefill_tokens"]
    res = await engine.generate_one(req(prompt, max_tokens=6, seed=1, n=3))
    assert engine.stats["prefill_tokens"] - before == 1  # its logits need the last token
    assert max(gap(engine.model, prompt, c) for c in res.completions) < 1e-4


async def test_an_engine_keeps_its_cache_within_the_bound(random_model_dir):
    probe = TransformersEngine.from_pretrained(random_model_dir, threads=1, admit_window_s=0)
    a = probe.tokenizer.encode(SYSTEM + "What is 12 + 30?")
    b = probe.tokenizer.encode("Something else entirely, with no common start: 9 - 2?")
    await probe.generate_one(req(a, max_tokens=1))
    per_token = probe.prefix_cache.bytes // probe.prefix_cache.tokens
    await probe.close()
    bound = per_token * (len(a) + 4)  # room for one prompt, not two
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=1, admit_window_s=0,
                                             prefix_cache_bytes=bound)
    try:
        for i, p in enumerate((a, b, a)):
            res = await eng.generate_one(req(p, max_tokens=4, seed=i))
            assert eng.prefix_cache.bytes <= bound
            assert gap(eng.model, p, res.completions[0]) < 1e-4
        assert eng.prefix_cache.stats["evictions"] >= 1
        # a came back after b pushed it out: computed whole again
        assert eng.stats["prefill_tokens"] == len(a) + len(b) + len(a)
    finally:
        await eng.close()


async def test_a_weight_update_drops_the_cache(engine):
    prompt = engine.tokenizer.encode(SYSTEM + "sum 4 and 5")
    first = await engine.generate_one(req(prompt, max_tokens=4, seed=0))
    state = {k: v.clone() for k, v in engine.model.state_dict().items()}
    state["model.norm.weight"].mul_(-2.0)
    await engine.update_weights(state)
    assert engine.prefix_cache.tokens == 0
    # the next turn under the new weights runs whole, and its log-probs are the new weights'
    turn = prompt + first.completions[0].completion_ids + engine.tokenizer.encode(" ok?")
    before = engine.stats["prefill_tokens"]
    res = await engine.generate_one(req(turn, max_tokens=4, seed=1))
    assert engine.stats["prefill_tokens"] - before == len(turn)
    assert res.completions[0].weight_version == 1
    assert gap(engine.model, turn, res.completions[0]) < 1e-4
    assert engine.prefix_cache.version == 1 and engine.prefix_cache.tokens > 0
