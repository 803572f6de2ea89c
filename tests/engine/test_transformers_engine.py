"""The built-in engine: exact log-probs, continuous batching, stops, seeds, weight updates."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")

from logprob_reference import fresh_logprobs  # noqa: E402
from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.transformers_engine import TransformersEngine  # noqa: E402
from rltune.sdk.errors import ValidationError  # noqa: E402


@pytest.fixture
async def engine(random_model_dir):
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=2, max_batch_size=16)
    yield eng
    await eng.close()


def req(ids, **kw):
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**kw))


@pytest.fixture
async def eager_engine(random_model_dir):
    """No admission window: each arrival is admitted at once (joins the running batch)."""
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=2, max_batch_size=16,
                                             admit_window_s=0)
    yield eng
    await eng.close()


async def test_logprobs_match_fresh_forward_under_staggered_joins(eager_engine):
    """Requests of different lengths join a running batch; every log-prob is still exact."""
    engine = eager_engine
    tok = engine.tokenizer
    texts = ["hi", "What is 12 + 30? Please compute it.", "sum", "the weather in the city today"]
    tasks = []
    for i in range(12):
        ids = tok.encode(texts[i % 4] * (1 + i % 3))
        tasks.append(asyncio.create_task(engine.generate_one(req(ids, max_tokens=12 + i, seed=i))))
        await asyncio.sleep(0.004)  # arrive while earlier ones are decoding
    results = await asyncio.gather(*tasks)
    assert engine.stats["prefills"] > 1, "requests should have joined in several admissions"
    assert engine.stats["max_rows"] > 1
    worst = 0.0
    for res in results:
        c = res.completions[0]
        assert c.finish_reason in ("length", "stop")
        assert len(c.completion_ids) == len(c.logprobs) > 0
        ref = fresh_logprobs(engine.model, res.prompt_ids, c.completion_ids)
        worst = max(worst, *(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)))
    assert worst < 1e-4


async def test_logprobs_are_the_sampling_temperatures_as_the_trainer_recomputes_them(engine):
    """A row sampled at temperature T reports log_softmax(logits / T), unfiltered, in a batch
    with greedy and temperature-1 rows: what the trainer recomputes at the job's temperature
    (``token_logprobs_BT``), so the off-policy correction and the mismatch metric compare
    like with like."""
    from rltune.trainer.logprobs import token_logprobs_BT

    ids = engine.tokenizer.encode("What is 12 + 30? Please compute it.")
    temps = [1.3, 0.0, 1.0, 0.7, 1.3]
    results = await engine.generate([req(ids, temperature=t, max_tokens=10, seed=i, top_p=0.9
                                         if i == 4 else 1.0)
                                     for i, t in enumerate(temps)])
    for t, res in zip(temps, results, strict=True):
        c = res.completions[0]
        full = torch.tensor([res.prompt_ids + c.completion_ids])
        logp, _ = token_logprobs_BT(engine.model, full, torch.ones_like(full),
                                    temperature=t or 1.0)
        want = logp[0, len(res.prompt_ids):].tolist()
        assert max(abs(a - b) for a, b in zip(want, c.logprobs, strict=True)) < 1e-4, t
    plain = fresh_logprobs(engine.model, results[0].prompt_ids, results[0].completions[0]
                           .completion_ids)
    assert max(abs(a - b) for a, b in zip(plain, results[0].completions[0].logprobs,
                                          strict=True)) > 1e-3  # not temperature 1's


async def test_greedy_batched_equals_greedy_alone(engine):
    tok = engine.tokenizer
    prompts = [tok.encode(t) for t in ["a b c", "What is 7 * 6?", "hello there my friend"]]
    alone = [await engine.generate_one(req(p, temperature=0, max_tokens=10)) for p in prompts]
    together = await engine.generate([req(p, temperature=0, max_tokens=10) for p in prompts])
    for a, b in zip(alone, together, strict=True):
        assert a.completions[0].completion_ids == b.completions[0].completion_ids


async def test_seed_reproducible_and_n_choices(engine):
    ids = engine.tokenizer.encode("What is 3 + 4?")
    a = await engine.generate_one(req(ids, max_tokens=8, seed=7, n=3))
    b = await engine.generate_one(req(ids, max_tokens=8, seed=7, n=3))
    assert [c.index for c in a.completions] == [0, 1, 2]
    assert [c.completion_ids for c in a.completions] == [c.completion_ids for c in b.completions]
    # choices use seed+index, so they are not all the same sample
    assert len({tuple(c.completion_ids) for c in a.completions}) > 1


async def test_stop_tokens_stop_strings_and_min_tokens(engine):
    tok = engine.tokenizer
    ids = tok.encode("count")
    free = (await engine.generate_one(req(ids, temperature=0, max_tokens=20))).completions[0]
    # Use the greedy continuation's 4th token as a stop token: generation must end right there.
    stop_tok = free.completion_ids[3]
    first = free.completion_ids.index(stop_tok)
    c = (await engine.generate_one(req(ids, temperature=0, max_tokens=20,
                                       stop_token_ids=[stop_tok]))).completions[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop_tok
    assert c.completion_ids == free.completion_ids[: first + 1]
    # A stop string taken from the decoded greedy text ends generation once it appears.
    text = tok.decode(free.completion_ids[:6], skip_special_tokens=False)
    stop_str = text[-3:]
    c = (await engine.generate_one(req(ids, temperature=0, max_tokens=20,
                                       stop=[stop_str]))).completions[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop_str
    assert stop_str in tok.decode(c.completion_ids, skip_special_tokens=False)
    assert len(c.completion_ids) <= 6
    # min_tokens bans the stop token until reached: all 5 tokens differ from it.
    c = (await engine.generate_one(req(ids, temperature=0, max_tokens=5, min_tokens=5,
                                       stop_token_ids=[stop_tok]))).completions[0]
    assert len(c.completion_ids) == 5 and c.finish_reason == "length"
    assert stop_tok not in c.completion_ids


async def test_top_k_one_is_greedy_and_top_logprobs(engine):
    ids = engine.tokenizer.encode("What is 9 - 2?")
    g = (await engine.generate_one(req(ids, temperature=0, max_tokens=6))).completions[0]
    k1 = (await engine.generate_one(req(ids, temperature=1.5, top_k=1, max_tokens=6,
                                        top_logprobs=3))).completions[0]
    assert k1.completion_ids == g.completion_ids
    assert len(k1.top_logprobs) == 6
    for tok_id, lp, top in zip(k1.completion_ids, k1.logprobs, k1.top_logprobs, strict=True):
        assert len(top) == 3 and top[0].token_id == tok_id
        assert abs(top[0].logprob - lp) < 1e-6
        assert top[0].logprob >= top[1].logprob >= top[2].logprob


async def test_pause_drains_then_update_weights_changes_outputs(engine):
    ids = engine.tokenizer.encode("What is 5 + 5?")
    before = (await engine.generate_one(req(ids, temperature=0, max_tokens=8))).completions[0]
    running = asyncio.create_task(engine.generate_one(req(ids, max_tokens=30, seed=1)))
    await asyncio.sleep(0.01)
    await engine.pause()
    assert running.done(), "pause() returns only after running sequences finish"
    # a request made while paused waits until resume
    waiting = asyncio.create_task(engine.generate_one(req(ids, temperature=0, max_tokens=8)))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    new_state = {k: v.clone() for k, v in engine.model.state_dict().items()}
    new_state["model.norm.weight"].mul_(-3.0)
    version = await engine.update_weights(new_state)
    assert version == engine.weight_version == 1
    await engine.resume()
    after = (await waiting).completions[0]
    assert (await waiting).weight_version == 1
    assert after.completion_ids != before.completion_ids
    ref = fresh_logprobs(engine.model, ids, after.completion_ids)
    assert max(abs(a - b) for a, b in zip(ref, after.logprobs, strict=True)) < 1e-4


async def test_stream_yields_every_token_then_finish(engine):
    ids = engine.tokenizer.encode("stream me")
    seen, finished = [], None
    async for delta in engine.stream(req(ids, max_tokens=7, seed=3)):
        seen.extend(delta.token_ids)
        if delta.finished:
            finished = delta.finished
    assert finished is not None and finished.completion_ids == seen and len(seen) == 7


async def test_bad_prompts_are_rejected_clearly(engine):
    with pytest.raises(ValidationError, match="context"):
        await engine.generate_one(req([5] * engine.max_context, max_tokens=1))
    with pytest.raises(ValidationError, match="outside the vocabulary"):
        await engine.generate_one(req([10**7], max_tokens=1))


@pytest.mark.parametrize(("window", "one_prefill"), [(1.0, True), (0.0, False)])
async def test_an_idle_engine_gathers_a_burst_into_one_prefill(random_model_dir, window,
                                                               one_prefill):
    eng = TransformersEngine.from_pretrained(random_model_dir, threads=1, max_batch_size=16,
                                             admit_window_s=window)
    try:
        ids = eng.tokenizer.encode("What is 2 + 3?")
        tasks = []
        for i in range(3):  # 150 ms apart: well inside a 1 s window, far outside none
            tasks.append(asyncio.create_task(eng.generate_one(req(ids, max_tokens=2, seed=i))))
            await asyncio.sleep(0.15)
        await asyncio.gather(*tasks)
        assert (eng.stats["prefills"] == 1) is one_prefill, eng.stats
    finally:
        await eng.close()
