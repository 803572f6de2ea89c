"""Gateway hardening: disconnects free the engine, tool schemas are normalised, deep bodies 400."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

pytest.importorskip("torch")

LONG = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20000,
        "ignore_eos": True}
AUTH = {"Authorization": "Bearer serve-key"}


@pytest.fixture
async def long_gateway(tiny_model_dir):
    """A gateway whose engine allows 20,000-token answers (tens of seconds each)."""
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=1, max_context=30000)
    gw = await Gateway.start(engine, host="127.0.0.1", port=0, static_keys=("serve-key",))
    yield gw
    await gw.stop(close_engine=True)


async def engine_idle(engine, within: float) -> bool:
    """No row running or waiting and no token generated for 0.5 s, within ``within`` s (any
    threaded engine: the built-in one here, vLLM in tests/engine/test_vllm_engine.py)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        tokens = engine.stats["tokens"]
        await asyncio.sleep(0.5)
        if not engine.rows_in_flight() and engine.stats["tokens"] == tokens:
            return True
    return False


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_that_leaves_frees_the_engine(long_gateway, stream):
    gw = long_gateway
    url = gw.base_url + "/chat/completions"
    async with httpx.AsyncClient(timeout=30) as http:
        async def call():
            if stream:
                async with http.stream("POST", url, json={**LONG, "stream": True},
                                       headers=AUTH) as r:
                    async for _ in r.aiter_bytes():
                        pass
            else:
                await http.post(url, json=LONG, headers=AUTH)

        async def leave_early():  # the client gives up after 1 s and closes its connection
            with pytest.raises((asyncio.TimeoutError, httpx.TimeoutException)):
                await asyncio.wait_for(call(), 1.0)
        await asyncio.gather(*(leave_early() for _ in range(4)))
    # 4 x 20,000 tokens would take minutes; the rows go within seconds of the clients
    assert await engine_idle(gw.engine, within=8.0), (
        f"{gw.engine.rows_in_flight()} rows still generating after their clients left")
    assert gw.engine.stats["aborted"] == 4  # each caller's job was aborted, once
    assert gw.engine.stats["tokens"] < 4 * 20000
    async with httpx.AsyncClient(timeout=30) as http:  # and the next caller is served at once
        t0 = time.monotonic()
        r = await http.post(url, json={**LONG, "max_tokens": 5}, headers=AUTH)
        assert r.status_code == 200 and time.monotonic() - t0 < 5


async def test_tool_schema_keys_outside_the_function_schema_are_dropped(gateway):
    gateway.register("k-1", "r-1")
    tool = {"type": "function", "function": {
        "name": "calculator", "description": "evaluate", "parameters": {
            "type": "object", "properties": {"expr": {"type": "string"}}}}}
    strict = {"type": "function", "function": {**tool["function"], "strict": False}}
    body = {"model": "m", "messages": [{"role": "user", "content": "2+2"}], "max_tokens": 1}
    async with httpx.AsyncClient(timeout=30) as http:
        for t in (tool, strict):
            r = await http.post(gateway.base_url + "/chat/completions",
                                json={**body, "tools": [t]},
                                headers={"Authorization": "Bearer k-1"})
            assert r.status_code == 200, r.text
    a, b = gateway.calls("r-1")
    assert a.prompt_ids == b.prompt_ids
    assert b.tools == [tool]


async def test_a_deeply_nested_body_is_a_400(gateway):
    deep = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    less = b'{"model": "m", "messages": [{"role": "user", "content": ' + b"[" * 200 + \
        b"]" * 200 + b"}]}"
    async with httpx.AsyncClient(timeout=30) as http:
        for content in (deep, less):
            r = await http.post(gateway.base_url + "/chat/completions", content=content,
                                headers={"Authorization": "Bearer serve-key",
                                         "content-type": "application/json"})
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "too_deep"
        assert (await http.get(gateway.base_url.removesuffix("/v1") + "/health")).status_code \
            == 200
