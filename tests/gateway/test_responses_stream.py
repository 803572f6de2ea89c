"""``POST /v1/responses`` with ``stream: true``: the Responses API's event sequence, read by the
openai client's stream helper (which checks the events' identities and rebuilds the response)
and by an OpenAI Agents SDK streamed run, with the call captured as a non-streamed one is."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT, calculate


async def test_a_streamed_response_is_the_event_sequence_and_is_captured(gateway):
    gateway.register("k", "r")
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="k", max_retries=0)
    kinds, deltas = [], []
    async with client.responses.stream(model="policy", input="hello", instructions="be brief",
                                       max_output_tokens=6, temperature=0) as stream:
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
    # the untrained model runs into max_output_tokens: the last event is response.incomplete
    # (the helper's get_final_response waits for response.completed only, as on OpenAI)
    final = event.response
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == f"response.{final.status}" and final.status in ("completed",
                                                                         "incomplete")
    assert deltas and "".join(deltas) == final.output_text
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done")
    assert final.usage.output_tokens <= 6
    [call] = gateway.pop_calls("r")  # captured once, token-exact, like a non-streamed call
    assert len(call.completion_ids) == final.usage.output_tokens
    assert call.response_message["content"] == final.output_text
    # the same request, not streamed, samples the same text (greedy)
    again = await client.responses.create(model="policy", input="hello",
                                          instructions="be brief", max_output_tokens=6,
                                          temperature=0)
    assert again.output_text == final.output_text


async def test_a_refused_stream_is_a_400_and_the_raw_events_are_numbered(gateway):
    """A request refused before sampling is a plain 400; the raw events carry ``event:``
    lines and growing sequence numbers."""
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60) as http:
        r = await http.post("/responses", headers={"Authorization": "Bearer serve-key"},
                            json={"model": "p", "input": "hi", "stream": True,
                                  "max_output_tokens": 10**6})
        assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"
        r = await http.post("/responses", headers={"Authorization": "Bearer serve-key"},
                            json={"model": "p", "input": "hi", "stream": True,
                                  "max_output_tokens": 2})
    assert r.headers["content-type"].startswith("text/event-stream")
    blocks = [b for b in r.text.split("\n\n") if b]
    events = [b.split("\n")[0].removeprefix("event: ") for b in blocks]
    data = [json.loads(b.split("\n")[1].removeprefix("data: ")) for b in blocks]
    assert [d["type"] for d in data] == events
    assert [d["sequence_number"] for d in data] == list(range(len(data)))


async def test_an_error_once_the_stream_began_is_an_error_event_and_the_end():
    from rltune.gateway.responses import ResponsesRequest
    from rltune.gateway.responses_stream import response_events
    from rltune.sdk.errors import ValidationError

    async def chunks():
        yield {"choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": None}]}
        raise ValidationError("the engine stopped", where="engine", hint="retry")

    out = [e async for e in response_events(ResponsesRequest(input="hi"), chunks(), "m")]
    last = json.loads(out[-1].split("data: ", 1)[1])
    assert out[-1].startswith("event: error\n") and "the engine stopped" in last["message"]
    assert "response.completed" not in "".join(out)


@pytest.fixture
async def nano_gateway(nano_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(nano_model_dir, threads=2)
    gw = await Gateway.start(engine)
    yield gw
    await gw.stop(close_engine=True)


async def test_an_agents_sdk_streamed_run_calls_its_tool_through_function_call_events(
        nano_gateway):
    """``Runner.run_streamed`` on the Responses API: the function call arrives as a
    ``function_call`` item, the tool runs, and the answer after it streams as text."""
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    ran: list[str] = []

    async def run_calculator(ctx, args: str) -> str:
        ran.append(calculate(json.loads(args)["expression"]))
        return ran[-1]

    fn = CALCULATOR_TOOL["function"]
    calculator = agents.FunctionTool(
        name="calculator", description=fn["description"], params_json_schema=fn["parameters"],
        on_invoke_tool=run_calculator, strict_json_schema=False)
    nano_gateway.register("k", "r")
    client = openai.AsyncOpenAI(base_url=nano_gateway.base_url, api_key="k")
    agent = agents.Agent(
        name="calc", instructions=SYSTEM_PROMPT, tools=[calculator],
        model=agents.OpenAIResponsesModel(model="nano", openai_client=client),
        model_settings=agents.ModelSettings(tool_choice="required", temperature=0,
                                            max_tokens=48),
        tool_use_behavior="stop_on_first_tool")
    result = agents.Runner.run_streamed(agent, "What is 7 * 8?", max_turns=2)
    raw = [e.data.type async for e in result.stream_events() if e.type == "raw_response_event"]
    assert ran, "the agent never ran its tool"
    assert "response.function_call_arguments.done" in raw and raw[-1] == "response.completed"
    assert result.final_output == ran[-1]
    [call] = nano_gateway.pop_calls("r")
    assert call.response_message["tool_calls"][0]["function"]["name"] == "calculator"
