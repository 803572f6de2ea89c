"""Keys (per-rollout, static, unknown) and 4xx answers in OpenAI's error shape."""

from __future__ import annotations

import httpx
import openai
import pytest

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def url(gw):
    return gw.base_url + "/chat/completions"


async def post(gw, body=None, *, key="serve-key", content=None, headers=None):
    h = {"Authorization": f"Bearer {key}"} if key else {}
    h.update(headers or {})
    async with httpx.AsyncClient() as http:
        if content is not None:
            return await http.post(url(gw), content=content,
                                   headers={**h, "content-type": "application/json"})
        return await http.post(url(gw), json=body, headers=h)


def assert_error(resp, status, *words):
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    for w in words:
        assert w in err["message"], err["message"]
    return err


async def test_unknown_missing_and_expired_keys(gateway):
    assert_error(await post(gateway, BODY, key="nope"), 401, "unknown")
    assert_error(await post(gateway, BODY, key=None), 401, "missing api key")
    gateway.register("k-1", "r-1")
    assert (await post(gateway, BODY, key="k-1")).status_code == 200
    gateway.unregister("k-1")
    assert_error(await post(gateway, BODY, key="k-1"), 401)
    assert len(gateway.calls("r-1")) == 1  # captured calls survive unregister until popped
    with pytest.raises(openai.AuthenticationError):
        await openai.AsyncOpenAI(base_url=gateway.base_url, api_key="bad").models.list()


async def test_malformed_and_invalid_bodies(gateway):
    assert_error(await post(gateway, content=b"{not json"), 400, "not valid JSON")
    err = assert_error(await post(gateway, {"model": "m"}), 400, "messages")
    assert err["param"] == "messages"
    err = assert_error(await post(gateway, {**BODY, "messages": [{"role": "robot",
                                                                  "content": "x"}]}), 400)
    assert err["param"].startswith("messages.0.role")
    assert_error(await post(gateway, {**BODY, "temperature": 7}), 400, "temperature")
    assert_error(await post(gateway, {**BODY, "max_tokens": 10**6}), 400, "context")
    assert_error(await post(gateway, {**BODY, "presence_penalty": 1.0}), 400, "not supported")
    tool = {"type": "function", "function": {"name": "calculator", "parameters": {}}}
    assert_error(await post(gateway, {**BODY, "tools": [tool], "tool_choice": {
        "type": "function", "function": {"name": "other"}}}), 400, "not in tools")
    assert_error(await post(gateway, {**BODY, "tool_choice": "required"}), 400, "tools")


async def test_oversized_requests(gateway):
    gateway.max_body_bytes = 2000
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 5000}]}
    assert_error(await post(gateway, big), 413, "limit")
    gateway.max_body_bytes = 10**7
    # longer than the model's context: a clear 400, not a 500
    long = {**BODY, "messages": [{"role": "user", "content": "1 " * 5000}]}
    assert_error(await post(gateway, long), 400, "context")


async def test_every_route_answers_openais_error_shape_to_the_openai_client(gateway):
    """Unknown routes and methods and invalid bodies: the openai client raises its typed error
    with the gateway's message (FastAPI's own ``{"detail"}`` would leave it a bare status)."""
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="serve-key", max_retries=0)
    with pytest.raises(openai.NotFoundError) as err:
        await client.get("/embeddings", cast_to=object)
    assert "GET /v1/embeddings is not a route" in err.value.message
    assert "POST /v1/chat/completions" in err.value.message
    assert err.value.code == "unknown_url"
    with pytest.raises(openai.APIStatusError) as err:
        await client.delete("/chat/completions", cast_to=object)
    assert err.value.status_code == 405 and "method not allowed" in err.value.message
    assert err.value.response.headers["allow"] == "POST"
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="m", messages=[], max_tokens=2)
    assert err.value.param == "messages" and "messages" in err.value.message
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(model="m", input="hi", max_output_tokens=0)
    assert err.value.param == "max_output_tokens"
    async with httpx.AsyncClient() as http:  # outside /v1 too
        assert_error(await http.get(gateway.base_url.removesuffix("/v1") + "/nope"), 404,
                     "GET /nope")
