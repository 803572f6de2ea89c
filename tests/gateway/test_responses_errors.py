"""Item 13 of issue 30: bad Responses input is a 400 JSON error, deployments serve
``/v1/responses``, and a serving gateway answers 404 for a model it does not serve."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("body, param", [
    ({"input": []}, "input"),
    ({"input": [{"role": "system", "content": "only a system prompt"}]}, "input"),
    ({"input": [*HI, {"type": "function_call_output", "call_id": "nope", "output": "5"}]},
     "input[1].call_id"),
    ({"input": [*HI, {"type": "function_call", "call_id": "c1"}]}, "input[1].name"),
    ({"input": [1, 2]}, "input"),
])
async def test_bad_input_is_a_400_json_error(gateway, body, param):
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as c:
        r = await c.post("/responses", json={"model": "policy", "max_output_tokens": 2, **body},
                         headers={"Authorization": "Bearer serve-key"})
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["param"].startswith(param), r.json()


async def test_a_call_and_its_output_are_accepted(gateway):
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60) as c:
        r = await c.post("/responses", headers={"Authorization": "Bearer serve-key"}, json={
            "model": "policy", "max_output_tokens": 2, "input": [
                *HI, {"type": "function_call", "call_id": "c1", "name": "calc",
                      "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "5"}]})
    assert r.status_code == 200, r.text


async def test_a_serving_gateway_refuses_unknown_models(tiny_model_dir):
    """``rltune serve`` (strict_model) answers 404 for another model, like a deployment;
    a training gateway keeps taking any name (agents send their own)."""
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=1, model_name="mine")
    gw = await Gateway.start(engine, open_access=True, strict_model=True)
    try:
        async with httpx.AsyncClient(base_url=gw.base_url, timeout=60) as c:
            for path, body in (("/chat/completions", {"messages": HI, "max_tokens": 2}),
                               ("/responses", {"input": "hi", "max_output_tokens": 2})):
                r = await c.post(path, json={**body, "model": "gpt-4o"})
                assert r.status_code == 404, r.text
                assert r.json()["error"]["code"] == "model_not_found"
                assert (await c.post(path, json={**body, "model": "mine"})).status_code == 200
                assert (await c.post(path, json=body)).status_code == 200
    finally:
        await gw.stop(close_engine=True)
    import inspect

    from rltune.cli import serve_cmd  # `rltune serve` builds its gateway this way

    assert "strict_model=True" in inspect.getsource(serve_cmd)


async def test_a_deployment_serves_responses(tmp_path, tiny_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway.server import Gateway
    from rltune.lifecycle.serveproc import KeyRing, Router

    (tmp_path / "internal.key").write_text("internal")
    (tmp_path / "keys.json").write_text(json.dumps({"sha256": [
        hashlib.sha256(b"key-a").hexdigest()]}))
    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=1, model_name="m-a")
    router = Router({"m-a": Gateway(engine, open_access=True)}, KeyRing(tmp_path))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=router),
                                     base_url="http://t", timeout=60) as c:
            ok = {"Authorization": "Bearer key-a"}
            r = await c.post("/v1/responses", headers=ok,
                             json={"model": "m-a", "input": "hi", "max_output_tokens": 2})
            assert r.status_code == 200 and r.json()["object"] == "response", r.text
            r = await c.post("/v1/responses", headers=ok, json={"model": "x", "input": "hi"})
            assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
            r = await c.post("/v1/responses", headers=ok, json={"model": "m-a", "input": []})
            assert r.status_code == 400, r.text
            r = await c.post("/v1/responses", headers=ok, content=b"x" * (5 * 2**20))
            assert r.status_code == 413, r.text
    finally:
        await engine.close()
