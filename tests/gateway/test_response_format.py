"""``response_format`` (chat) and ``text.format`` (Responses): honoured by an engine that
constrains decoding to JSON, refused by name (400) by one that cannot, never silently ignored."""

from __future__ import annotations

import openai
import pytest

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}
CHAT_FORMATS = [({"type": "json_object"}, {}),
                ({"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}, SCHEMA)]
TEXT_FORMATS = [({"type": "json_object"}, {}),
                ({"type": "json_schema", "name": "a", "schema": SCHEMA, "strict": True}, SCHEMA)]


@pytest.fixture
def client(gateway):
    return openai.AsyncOpenAI(base_url=gateway.base_url, api_key="serve-key", max_retries=0)


async def test_the_builtin_engine_refuses_json_formats_by_name(client):
    for fmt, _ in CHAT_FORMATS:
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                response_format=fmt)
        assert err.value.param == "response_format"
        assert f"response_format {fmt['type']}" in err.value.message
        assert "cannot constrain decoding to JSON" in err.value.message
        assert "--engine vllm" in err.value.message
    for fmt, _ in TEXT_FORMATS:
        with pytest.raises(openai.BadRequestError) as err:
            await client.responses.create(model="m", input="hi", max_output_tokens=2,
                                          text={"format": fmt})
        assert err.value.param == "text.format" and "cannot constrain" in err.value.message
    # plain text is what the engine does anyway
    r = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
        response_format={"type": "text"})
    assert r.choices[0].finish_reason in ("length", "stop")


async def test_a_json_schema_format_without_a_schema_or_an_unknown_format_is_named(client):
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
            response_format={"type": "json_schema", "json_schema": {"name": "a"}})
    assert err.value.param == "response_format.json_schema.schema"
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(model="m", input="hi", text={"format": {"type": "xml"}})
    assert err.value.param == "text.format" and "xml" in err.value.message


async def test_an_engine_that_constrains_json_gets_the_schema(gateway, client):
    """The gateway hands the format's schema to an engine that constrains decoding (vLLM's
    structured outputs); here the built-in engine stands in, told it constrains, and the
    captured call's sampling parameters show what reached it."""
    gateway.engine.constrains_json = True
    gateway.register("k", "r")
    client = client.with_options(api_key="k")
    for fmt, _ in CHAT_FORMATS:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
            response_format=fmt)
    for fmt, _ in TEXT_FORMATS:
        r = await client.responses.create(model="m", input="hi", max_output_tokens=2,
                                          text={"format": fmt})
        assert r.text.format.type == fmt["type"]
    got = [c.sampling.get("json_schema") for c in gateway.pop_calls("r")]
    assert got == [s for _, s in CHAT_FORMATS + TEXT_FORMATS]


async def test_the_builtin_engine_itself_refuses_a_json_constraint(gateway):
    from rltune.engine.types import GenerationRequest, SamplingParams
    from rltune.sdk.errors import ValidationError

    with pytest.raises(ValidationError, match="cannot constrain decoding to JSON"):
        await gateway.engine.generate_one(GenerationRequest(
            prompt_ids=[1, 2], sampling=SamplingParams(max_tokens=1, json_schema={})))
