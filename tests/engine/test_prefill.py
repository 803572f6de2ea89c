"""Shared-prefix prefill: the plan, and an engine that computes less but samples the same."""

from __future__ import annotations

import asyncio

import pytest

from rltune.engine.prefill import common_prefix, plan_prefill

torch = pytest.importorskip("torch")

from logprob_reference import fresh_logprobs  # noqa: E402
from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.transformers_engine import TransformersEngine  # noqa: E402

SYSTEM = ("You are a careful assistant. Use the calculator tool for arithmetic and end with "
          "the answer. ")
QUESTIONS = ["What is 12 + 30?", "What is 7 * 6?", "sum 4 and 5", "What is 9 - 2, exactly?"]


def test_plan_dedupes_and_shares_the_common_prefix():
    a, b = [1, 2, 3, 4, 5], [1, 2, 3, 9]
    p = plan_prefill([a, b, a, a], min_shared=2)
    assert p.unique == [a, b] and p.row_of == [0, 1, 0, 0] and p.duplicated
    assert p.shared == 3
    # the prefix once, then each distinct suffix
    assert p.computed_tokens(starts=[3, 3], reused=0) == 3 + 2 + 1
    # 2 of the prefix's tokens cached, and the first prompt cached up to its last token
    assert p.computed_tokens(starts=[4, 3], reused=2) == 1 + 1 + 1


def test_plan_keeps_a_token_per_row_and_respects_the_threshold():
    # one distinct prompt: all but its last token is the shared prefix
    p = plan_prefill([[1, 2, 3, 4]] * 3, min_shared=2)
    assert (p.shared, p.computed_tokens([3], 0)) == (3, 4)
    # a prompt that is a prefix of another still keeps its own last token
    assert plan_prefill([[1, 2, 3], [1, 2, 3, 4, 5]], min_shared=1).shared == 2
    # below the threshold the prompts run whole (unless cached)
    p = plan_prefill([[1, 2, 3, 4], [1, 2, 7, 8]], min_shared=3)
    assert (p.shared, p.computed_tokens([0, 0], 0)) == (0, 8)
    assert common_prefix([1, 2], [1, 2, 3]) == 2


@pytest.fixture
async def engine(random_model_dir):
    # a window wide enough that the test's requests always share one admission
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=1, max_batch_size=32,
                                             admit_window_s=0.5, admit_window_max_s=2.0)
    yield eng
    await eng.close()


def req(ids, **kw):
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**kw))


def prompts_sharing_a_prefix(tok):
    ids = [tok.encode(SYSTEM + q) for q in QUESTIONS]
    shared = min(common_prefix(ids[0], p) for p in ids[1:])
    assert shared >= 16, "the test needs a prefix long enough to be shared"
    return ids, shared


async def test_one_admission_computes_the_shared_prefix_once_and_stays_exact(engine):
    ids, shared = prompts_sharing_a_prefix(engine.tokenizer)
    # GRPO-like: every prompt twice, plus one request with n=2
    requests = [req(p, max_tokens=6, seed=i) for i, p in enumerate(ids + ids)]
    requests.append(req(ids[0], max_tokens=6, seed=50, n=2))
    results = await engine.generate(requests)
    assert engine.stats["prefills"] == 1, engine.stats
    assert engine.stats["prompt_tokens"] == sum(len(p) for p in ids) * 2 + 2 * len(ids[0])
    assert engine.stats["prefill_tokens"] == shared + sum(len(p) - shared for p in ids)
    worst = 0.0
    for res in results:
        for c in res.completions:
            ref = fresh_logprobs(engine.model, res.prompt_ids, c.completion_ids)
            worst = max(worst, *(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)))
    assert worst < 1e-4


async def test_greedy_with_a_shared_prefix_equals_greedy_alone(random_model_dir):
    alone_engine = TransformersEngine.from_pretrained(random_model_dir, threads=1,
                                                      admit_window_s=0, min_shared_prefix=10**6,
                                                      prefix_cache_bytes=0)
    shared_engine = TransformersEngine.from_pretrained(random_model_dir, threads=1,
                                                       admit_window_s=0.5)
    try:
        ids, _ = prompts_sharing_a_prefix(alone_engine.tokenizer)
        alone = [await alone_engine.generate_one(req(p, temperature=0, max_tokens=10))
                 for p in ids]
        assert alone_engine.stats["prefill_tokens"] == sum(len(p) for p in ids)
        together = await shared_engine.generate([req(p, temperature=0, max_tokens=10)
                                                 for p in ids])
        assert shared_engine.stats["prefill_tokens"] < sum(len(p) for p in ids)
        for a, b in zip(alone, together, strict=True):
            assert a.completions[0].completion_ids == b.completions[0].completion_ids
    finally:
        await alone_engine.close()
        await shared_engine.close()


async def test_a_later_admission_reuses_the_cached_prefix_until_the_weights_change(engine):
    ids, shared = prompts_sharing_a_prefix(engine.tokenizer)
    await engine.generate([req(p, max_tokens=3, seed=1) for p in ids[:2]])
    before = engine.stats["prefill_tokens"]
    # a later request sharing the prefix: only what is new runs (exact log-probs still)
    late = await engine.generate_one(req(ids[2], max_tokens=6, seed=2))
    cached = max(common_prefix(ids[2], p) for p in ids[:2])
    assert cached >= shared
    assert engine.stats["prefill_tokens"] - before == len(ids[2]) - cached
    c = late.completions[0]
    ref = fresh_logprobs(engine.model, ids[2], c.completion_ids)
    assert max(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)) < 1e-4
    # new weights: the cached KV is stale, so the whole prompt runs again
    state = {k: v.clone() for k, v in engine.model.state_dict().items()}
    state["model.norm.weight"].mul_(-2.0)
    await engine.update_weights(state)
    assert engine.prefix_cache.tokens == 0 and engine.prefix_cache.stats["invalidations"] == 1
    before = engine.stats["prefill_tokens"]
    res = await engine.generate_one(req(ids[3], max_tokens=4, seed=3))
    assert engine.stats["prefill_tokens"] - before == len(ids[3])
    c = res.completions[0]
    ref = fresh_logprobs(engine.model, ids[3], c.completion_ids)
    assert max(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)) < 1e-4


async def test_an_idle_engine_waits_for_a_burst_until_arrivals_pause(random_model_dir):
    """Arrivals closer than the gap join one admission; a pause longer than it ends it."""
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=1, admit_window_s=0.2,
                                             admit_window_max_s=5.0)
    try:
        ids = eng.tokenizer.encode("What is 2 + 3?")
        tasks = []
        for i in range(4):  # 0.1 s apart: each arrival extends the 0.2 s window
            tasks.append(asyncio.create_task(eng.generate_one(req(ids, max_tokens=2, seed=i))))
            await asyncio.sleep(0.1)
        await asyncio.gather(*tasks)
        assert eng.stats["prefills"] == 1, eng.stats
        await asyncio.sleep(0.5)  # idle again, then two arrivals far apart
        first = asyncio.create_task(eng.generate_one(req(ids, max_tokens=2, seed=9)))
        await asyncio.sleep(0.6)
        await asyncio.gather(first, eng.generate_one(req(ids, max_tokens=2, seed=10)))
        assert eng.stats["prefills"] == 3, eng.stats
    finally:
        await eng.close()


async def test_the_window_cap_bounds_the_wait_under_a_steady_trickle(random_model_dir):
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=1, admit_window_s=0.3,
                                             admit_window_max_s=0.35)
    try:
        ids = eng.tokenizer.encode("What is 2 + 3?")
        tasks = []
        for i in range(5):  # every 0.2 s for 0.8 s: the quiet gap never comes
            tasks.append(asyncio.create_task(eng.generate_one(req(ids, max_tokens=1, seed=i))))
            await asyncio.sleep(0.2)
        await asyncio.gather(*tasks)
        assert eng.stats["prefills"] >= 2, eng.stats  # the cap admitted before the end
    finally:
        await eng.close()
