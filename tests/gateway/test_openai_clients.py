"""The official openai client (sync, async, streaming) against a real gateway."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

MSGS = [{"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "What is 12 + 30?"}]


async def test_async_sync_and_stream_agree(gateway):
    gateway.register("rk", "rollout-1")
    aclient = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="rk")
    a = await aclient.chat.completions.create(model="any", messages=MSGS, temperature=0,
                                              max_tokens=12)
    assert a.object == "chat.completion" and a.model == gateway.model_name
    assert a.choices[0].finish_reason in ("stop", "length")
    assert a.usage.completion_tokens > 0
    assert a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens

    # The sync client blocks, and the server runs in this loop: call it from a thread.
    def sync_call():
        client = openai.OpenAI(base_url=gateway.base_url, api_key="rk")
        return client.chat.completions.create(model="any", messages=MSGS, temperature=0,
                                              max_tokens=12)

    s = await asyncio.to_thread(sync_call)
    assert s.choices[0].message.content == a.choices[0].message.content

    stream = await aclient.chat.completions.create(
        model="any", messages=MSGS, temperature=0, max_tokens=12, stream=True,
        stream_options={"include_usage": True})
    parts, reasons, usage = [], [], None
    async for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            parts.append(ch.delta.content or "")
            if ch.finish_reason:
                reasons.append(ch.finish_reason)
    assert "".join(parts) == a.choices[0].message.content
    assert reasons == [a.choices[0].finish_reason]
    assert usage is not None and usage.completion_tokens == a.usage.completion_tokens

    calls = gateway.pop_calls("rollout-1")
    assert [c.call_index for c in calls] == [0, 1, 2]
    assert calls[0].completion_ids == calls[1].completion_ids == calls[2].completion_ids
    assert gateway.calls("rollout-1") == []


async def test_logprobs_n_and_models(gateway):
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="serve-key")
    models = await client.models.list()
    assert [m.id for m in models.data] == [gateway.model_name]
    r = await client.chat.completions.create(model="m", messages=MSGS, max_tokens=6, n=3,
                                             seed=1, logprobs=True, top_logprobs=2)
    assert [c.index for c in r.choices] == [0, 1, 2]
    for c in r.choices:
        lps = c.logprobs.content
        assert 0 < len(lps) <= 6
        for item in lps:
            assert item.logprob <= 0 and len(item.top_logprobs) == 2
            assert item.top_logprobs[0].logprob >= item.logprob - 1e-6
    assert r.usage.completion_tokens == sum(len(c.logprobs.content) for c in r.choices)
    # serving keys are not captured
    assert gateway.store.rollout_ids() == []


async def test_stop_string_cuts_text(gateway):
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="serve-key")
    free = await client.chat.completions.create(model="m", messages=MSGS, temperature=0,
                                                max_tokens=16)
    text = free.choices[0].message.content
    stop = text[4:6]
    assert stop
    r = await client.chat.completions.create(model="m", messages=MSGS, temperature=0,
                                             max_tokens=16, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == text[: text.find(stop)]


async def test_health(gateway):
    """Liveness for anyone; the counters (the prefix cache's among them) for a live key only."""
    url = gateway.base_url.removesuffix("/v1") + "/health"
    gateway.register("hk", "rollout-health")
    async with httpx.AsyncClient() as http:
        bare = await http.get(url)
        r = await http.get(url, headers={"Authorization": "Bearer hk"})
    assert bare.status_code == 200 and bare.json() == {"status": "ok"}
    assert r.status_code == 200 and r.json()["status"] == "ok"
    cache = r.json()["stats"]["engine_prefix_cache"]
    assert {"hits", "tokens", "bytes", "evictions", "prefill_tokens"} <= set(cache)


async def test_a_later_turn_prefills_only_its_new_tokens(gateway):
    """An agent that appends to its conversation: the engine computes the new turn only."""
    gateway.register("rk", "rollout-kv")
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="rk")
    engine = gateway.engine
    first = await client.chat.completions.create(model="m", messages=MSGS, max_tokens=8,
                                                 seed=1)
    turn = [*MSGS, first.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "And times 2?"}]
    before = engine.stats["prefill_tokens"]
    second = await client.chat.completions.create(model="m", messages=turn, max_tokens=8,
                                                  seed=2)
    computed = engine.stats["prefill_tokens"] - before
    seen = first.usage.prompt_tokens + first.usage.completion_tokens - 1  # KV of all but one
    assert computed == second.usage.prompt_tokens - seen
    async with httpx.AsyncClient() as http:
        health = (await http.get(gateway.base_url.removesuffix("/v1") + "/health",
                                 headers={"Authorization": "Bearer rk"})).json()
    cache = health["stats"]["engine_prefix_cache"]
    assert cache["hits"] >= 1 and cache["hit_tokens"] >= seen and cache["tokens"] > 0
    assert cache["prefill_tokens"] < cache["prompt_tokens"]


@pytest.mark.parametrize("n_clients", [8])
async def test_concurrent_requests_share_batches(gateway, n_clients):
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="serve-key")
    rs = await asyncio.gather(*(client.chat.completions.create(
        model="m", messages=MSGS, max_tokens=16, seed=i, extra_body={"min_tokens": 16})
        for i in range(n_clients)))
    assert all(r.usage.completion_tokens == 16 for r in rs)
    assert gateway.engine.stats["max_rows"] > 1
