"""The policy gateway over two built-in engine replicas (``EngineGroup``): OpenAI calls are
spread over both, each call's ``n`` choices are captured together, captured versions follow a
weight sync to both replicas, ``/health`` shows the replicas, and a failed replica answers 503
naming its index."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest


@pytest.fixture
async def group_gateway(tiny_model_dir):
    from rltune.engine.select import build_engine
    from rltune.gateway import Gateway

    engine = build_engine("builtin", tiny_model_dir, model_name="m", threads=1, replicas=2)
    gw = await Gateway.start(engine, host="127.0.0.1", port=0)
    yield gw
    await gw.stop(close_engine=True)


async def test_calls_spread_over_replicas_and_capture_their_versions(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    gw.register("key-a", "ra")
    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="key-a")
    messages = [{"role": "user", "content": "What is 2 + 2?"}]

    async def call(seed):
        return await client.chat.completions.create(model="m", messages=messages, n=2,
                                                    max_tokens=4, seed=seed)

    outs = await asyncio.gather(call(0), call(1))
    assert all(len(o.choices) == 2 for o in outs)
    assert group.assigned == [1, 1]  # one call per replica, both choices of a call on it
    await group.update_weights(group.replicas[0].model.state_dict())
    await call(2)
    calls = gw.pop_calls("ra")
    assert len(calls) == 6 and sorted(c.weight_version for c in calls) == [0, 0, 0, 0, 1, 1]

    async with httpx.AsyncClient() as http:
        url = gw.base_url.removesuffix("/v1") + "/health"
        assert (await http.get(url)).json() == {"status": "ok"}  # no key: liveness only
        health = (await http.get(url, headers={"Authorization": "Bearer key-a"})).json()
    assert health["weight_version"] == 1
    replicas = health["stats"]["engine_replicas"]
    assert [r["weight_version"] for r in replicas] == [1, 1]
    assert sum(r["requests"] for r in replicas) == 3 and all(r["failed"] is None
                                                             for r in replicas)


async def test_a_failed_replica_answers_503_with_its_index(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    gw.register("key-b", "rb")
    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="key-b", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    await group.replicas[1].close()
    await client.chat.completions.create(model="m", messages=messages, max_tokens=2)  # 0
    with pytest.raises(openai.APIStatusError) as info:  # replica 1's turn
        await client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert info.value.status_code == 503
    assert info.value.code == "engine_replica_failed" and "engine replica 1" in str(info.value)
    out = await client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert out.choices[0].message is not None  # replica 0 serves on
