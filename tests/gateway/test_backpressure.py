"""Backpressure (``gateway/admission.py``): past ``max_concurrent_requests`` calls in flight the
real gateway answers 429 with Retry-After; rollouts (the built-in one, and the OpenAI client an
agent uses) wait and retry, and every rollout's call is captured exactly once."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from openai import AsyncOpenAI

from rltune.gateway.admission import Admission
from rltune.rollout.runner import BuiltinRollout, retry_after_s
from rltune.sdk.data import ModelResource, RolloutInput

BODY = {"model": "m", "messages": [{"role": "user", "content": "2+2"}], "max_tokens": 12}


@pytest.fixture
async def limited_gateway(tiny_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=1)
    gw = await Gateway.start(engine, host="127.0.0.1", port=0, static_keys=("serve-key",),
                             max_concurrent_requests=1)
    yield gw
    await gw.stop(close_engine=True)


def test_admission_counts_and_advises_the_recent_call_time():
    a = Admission(limit=2)
    assert a.enter() and a.enter() and not a.enter()
    assert a.stats == {"admitted": 2, "rejected": 1, "peak_in_flight": 2}
    assert a.retry_after_s() == 0.5  # nothing measured yet
    a.leave(latency_s=1.0)
    a.leave(latency_s=2.0)  # mean 0.8 x 1.0 + 0.2 x 2.0
    assert a.retry_after_s() == pytest.approx(1.2)
    assert a.headers() == {"Retry-After": "2", "retry-after-ms": "1200"}
    assert Admission().enter()  # no limit
    with pytest.raises(ValueError, match="max_concurrent_requests"):
        Admission(limit=0)
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({}, default=0.1) == 0.1


async def test_over_the_limit_answers_429_with_retry_after(limited_gateway):
    gw = limited_gateway
    headers = {"Authorization": "Bearer serve-key"}
    async with httpx.AsyncClient(timeout=60) as http:
        url = gw.base_url + "/chat/completions"
        gw.admission.in_flight = 1  # one call holds the only slot
        resp = await http.post(url, json=BODY, headers=headers)
        assert resp.status_code == 429
        assert int(resp.headers["Retry-After"]) >= 1
        assert int(resp.headers["retry-after-ms"]) > 0
        err = resp.json()["error"]
        assert err["type"] == "rate_limit_error" and err["code"] == "rate_limited"
        assert "limit of 1 concurrent requests" in err["message"]
        gw.admission.in_flight = 0
        resp = await http.post(url, json=BODY, headers=headers)
        assert resp.status_code == 200
        assert gw.stats()["admission"]["in_flight"] == 0  # the slot was freed
        # a stream frees its slot when it ends
        async with http.stream("POST", url, json={**BODY, "stream": True},
                               headers=headers) as stream:
            assert stream.status_code == 200
            assert gw.admission.in_flight == 1
            _ = [line async for line in stream.aiter_lines()]
        assert gw.admission.in_flight == 0


async def test_rollouts_retry_after_429_and_each_call_is_captured_once(limited_gateway):
    gw = limited_gateway
    builtin = BuiltinRollout(timeout=60)
    client = AsyncOpenAI(base_url=gw.base_url, api_key="unused", max_retries=8)

    async def builtin_rollout(k: int) -> None:
        key = f"rk-b{k}"
        gw.register(key, f"b{k}")
        try:
            out = await builtin.call(RolloutInput(
                messages=BODY["messages"], sampling_params={"max_tokens": 12},
                model_resource=ModelResource(model_name="m", base_url=gw.base_url,
                                             api_key=key)))
            assert out.status.value == "success", out.error
        finally:
            gw.unregister(key)

    async def agent_rollout(k: int) -> None:  # an agent with the OpenAI SDK
        key = f"rk-o{k}"
        gw.register(key, f"o{k}")
        try:
            resp = await client.with_options(api_key=key).chat.completions.create(
                model="m", messages=BODY["messages"], max_tokens=12)
            assert resp.choices[0].message is not None
        finally:
            gw.unregister(key)

    try:
        await asyncio.gather(*(builtin_rollout(k) for k in range(4)),
                             *(agent_rollout(k) for k in range(4)))
    finally:
        await builtin.close()
        await client.close()
    stats = gw.admission.stats
    assert stats["rejected"] > 0  # 8 rollouts, one slot: most were told to wait
    assert stats["peak_in_flight"] == 1
    for rid in [f"b{k}" for k in range(4)] + [f"o{k}" for k in range(4)]:
        calls = gw.pop_calls(rid)
        assert [c.call_index for c in calls] == [0], rid  # the refused tries left nothing
