"""The policy gateway over two built-in engine replicas (``EngineGroup``): rollouts are spread
over both, every call of one rollout (and of one prompt's group) reaches one replica, each
call's ``n`` choices are captured together, captured versions follow a weight sync to both
replicas, ``/health`` shows each replica's load, sessions and prefix cache hits, and a failed
replica answers 503 naming its index while its sessions move to the other."""

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


async def test_rollouts_spread_over_replicas_and_capture_their_versions(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    gw.register("key-a", "ra")
    gw.register("key-a2", "ra2")
    messages = [{"role": "user", "content": "What is 2 + 2?"}]

    async def call(seed, key="key-a"):
        client = openai.AsyncOpenAI(base_url=gw.base_url, api_key=key)
        return await client.chat.completions.create(model="m", messages=messages, n=2,
                                                    max_tokens=4, seed=seed)

    outs = await asyncio.gather(call(0), call(1, "key-a2"))
    assert all(len(o.choices) == 2 for o in outs)
    assert group.assigned == [1, 1]  # one rollout per replica, both choices of a call on it
    await group.update_weights(group.replicas[0].model.state_dict())
    await call(2)
    calls = gw.pop_calls("ra")
    assert len(calls) == 4 and sorted(c.weight_version for c in calls) == [0, 0, 1, 1]

    async with httpx.AsyncClient() as http:
        url = gw.base_url.removesuffix("/v1") + "/health"
        assert (await http.get(url)).json() == {"status": "ok"}  # no key: liveness only
        health = (await http.get(url, headers={"Authorization": "Bearer key-a"})).json()
    assert health["weight_version"] == 1
    replicas = health["stats"]["engine_replicas"]
    assert [r["weight_version"] for r in replicas] == [1, 1]
    assert sum(r["requests"] for r in replicas) == 3 and all(r["failed"] is None
                                                             for r in replicas)


async def _turns(gw, key, turns, *, max_retries=0):
    """One multi-turn rollout: each turn sends the whole conversation so far, as agents do."""
    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key=key, max_retries=max_retries)
    messages = [{"role": "user", "content": "Count with me: one"}]
    for turn in range(turns):
        out = await client.chat.completions.create(model="m", messages=messages, max_tokens=3,
                                                   temperature=0)
        messages += [{"role": "assistant", "content": out.choices[0].message.content or "x"},
                     {"role": "user", "content": f"and then {turn}"}]


async def _health(gw):
    gw.register("key-health", "health")  # a valid key sees the counters
    async with httpx.AsyncClient() as http:
        return (await http.get(gw.base_url.removesuffix("/v1") + "/health",
                               headers={"Authorization": "Bearer key-health"})).json()


async def test_every_call_of_a_rollout_reaches_one_replica(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    gw.register("key-1", "r1")
    await _turns(gw, "key-1", 3)
    # by load alone the three turns would alternate over the idle replicas
    home = group.assigned.index(3)
    assert group.assigned[1 - home] == 0 and group.affine[home] == 2
    gw.register("key-2", "r2")  # a new rollout goes to the replica holding fewer sessions
    await _turns(gw, "key-2", 3)
    assert group.assigned == ([3, 3]) and group.affine == [2, 2]

    replicas = (await _health(gw))["stats"]["engine_replicas"]
    assert [r["sessions"] for r in replicas] == [1, 1]
    for r in replicas:  # turns 2 and 3 found the earlier turns' KV on their replica
        assert r["prefix_cache"]["hits"] >= 2, r
    gw.unregister("key-1")
    gw.unregister("key-2")
    replicas = (await _health(gw))["stats"]["engine_replicas"]
    assert [r["sessions"] for r in replicas] == [0, 0]  # a finished rollout frees its replica


async def test_a_prompt_groups_rollouts_share_one_replica(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    for k in range(3):  # the rollout runner names each rollout's group (its sample id)
        gw.register(f"key-g{k}", f"p0.r{k}", session="p0")
    await asyncio.gather(*(_turns(gw, f"key-g{k}", 2) for k in range(3)))
    assert sorted(group.assigned) == [0, 6] and sum(group.affine) == 5
    for k in range(2):
        gw.unregister(f"key-g{k}")
    assert sum(group.affinity.per_replica(2)) == 1  # one rollout of the group is still on
    gw.unregister("key-g2")
    assert group.affinity.per_replica(2) == [0, 0]


async def test_a_failed_replica_answers_503_with_its_index_and_its_sessions_move(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    gw.register("key-b", "rb")
    gw.register("key-c", "rc")
    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="key-c", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    await _turns(gw, "key-b", 1)  # rb: replica 0
    await group.replicas[1].close()
    with pytest.raises(openai.APIStatusError) as info:  # rc: the replica with no session
        await client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert info.value.status_code == 503
    assert info.value.code == "engine_replica_failed" and "engine replica 1" in str(info.value)
    # rc's replica is out: its next turns move to replica 0, and stay there
    await _turns(gw, "key-c", 2)
    await _turns(gw, "key-b", 1)
    assert group.assigned == [4, 1] and group.rerouted == [1, 0] and group.affine == [2, 0]
    replicas = (await _health(gw))["stats"]["engine_replicas"]
    assert replicas[1]["failed"] and replicas[0]["sessions"] == 2


async def test_an_agents_sdk_retry_lands_on_the_live_replica(group_gateway):
    gw, group = group_gateway, group_gateway.engine
    gw.register("key-d", "rd")
    await _turns(gw, "key-d", 1)
    home = group.assigned.index(1)
    await group.replicas[home].close()
    # the OpenAI SDK retries a 503 by itself: the rollout's next turn just works
    await _turns(gw, "key-d", 1, max_retries=2)
    assert group.rerouted[1 - home] == 1 and group.failed.keys() == {home}
