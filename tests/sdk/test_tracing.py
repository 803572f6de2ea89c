"""The observability names emit real OpenTelemetry spans."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput, RolloutInput
from rltune.sdk.tracing import (
    entry_span,
    observe_llm,
    observe_processor,
    observe_tool,
    rollout_context,
    trace_client,
    trace_tool,
)


class Judge(AbstractRewardProcessor):
    @observe_processor
    def process(self, input_data):
        return RewardOutput(reward=Reward(reward_score=0.75))


def by_name(spans, name):
    found = [s for s in spans.get_finished_spans() if s.name == name]
    assert found, [s.name for s in spans.get_finished_spans()]
    return found[0]


def test_observe_processor_records_io_ids_and_score(spans):
    inp = RewardInput(
        agent_output={"messages": []},
        request_metadata={
            "job_id": "j",
            "sample_id": "s-9",
            "rollout_id": "ro-9",
            "attempt_id": "a",
        },
    )
    Judge().process(inp)
    span = by_name(spans, "invoke_reward Judge")
    assert span.attributes["gen_ai.span.kind"] == "REWARD"
    assert span.attributes["bailian.agentic_rl.rollout_id"] == "ro-9"
    assert span.attributes["agentic_rl.result.reward_score"] == 0.75
    assert json.loads(span.attributes["input.value"])["func_type"] == "reward"


def test_processor_exception_is_recorded_and_reraised(spans):
    class Boom(AbstractRewardProcessor):
        @observe_processor
        async def process(self, input_data):
            raise RuntimeError("nope")

    import asyncio

    with pytest.raises(RuntimeError):
        asyncio.run(Boom().process(RewardInput(agent_output={})))
    span = by_name(spans, "invoke_reward Boom")
    assert span.status.status_code.name == "ERROR"
    assert span.events and span.events[0].name == "exception"


def test_api_key_never_reaches_span(spans):
    class Ro(AbstractRewardProcessor):
        func_type = None

        @observe_processor
        def process(self, input_data):
            return None

    Ro().process(
        RolloutInput(
            messages=[], model_resource={"model_name": "m", "base_url": "u", "api_key": "sk-secret"}
        )
    )
    span = by_name(spans, "invoke_rollout Ro")
    assert "sk-secret" not in span.attributes["input.value"]


def test_observe_tool_and_rollout_baggage(spans):
    @observe_tool(name="calculator")
    def calc(expression: str) -> str:
        return "5"

    with rollout_context("ro-1", "s-1", "a-1"):
        assert calc("2+3") == "5"
    span = by_name(spans, "execute_tool calculator")
    assert json.loads(span.attributes["tool_call_arguments"]) == {"expression": "2+3"}
    assert span.attributes["bailian.agentic_rl.rollout_id"] == "ro-1"
    assert span.attributes["bailian.agentic_rl.attempt_id"] == "a-1"


async def test_trace_tool_patches_langchain_tools(spans):
    from langchain_core.tools import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    trace_tool([add])
    trace_tool(add)  # idempotent
    assert add.invoke({"a": 2, "b": 3}) == 5
    assert await add.ainvoke({"a": 1, "b": 1}) == 2
    tool_spans = [s for s in spans.get_finished_spans() if s.name == "execute_tool add"]
    assert len(tool_spans) >= 2


class _FakeOpenAI(BaseHTTPRequestHandler):
    """An external OpenAI-compatible endpoint (a true external edge, so a fake is fine)."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        payload = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "4"},
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def openai_url():
    server = HTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_trace_client_records_llm_span(spans, openai_url):
    from openai import OpenAI

    client = trace_client(OpenAI(base_url=openai_url, api_key="k"))
    trace_client(client)  # idempotent: one span per call
    client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "2+2"}], temperature=0.5
    )
    llm = [s for s in spans.get_finished_spans() if s.name == "chat policy"]
    assert len(llm) == 1
    attrs = llm[0].attributes
    assert attrs["gen_ai.request.model"] == "policy"
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.usage.input_tokens"] == 7
    assert attrs["gen_ai.usage.output_tokens"] == 1


async def test_trace_async_client_and_observe_llm(spans, openai_url):
    from openai import AsyncOpenAI

    client = trace_client(AsyncOpenAI(base_url=openai_url, api_key="k"))
    await client.chat.completions.create(model="a", messages=[{"role": "user", "content": "x"}])
    assert by_name(spans, "chat a").attributes["gen_ai.usage.output_tokens"] == 1

    @observe_llm
    def ask(*, model, messages):
        return None

    ask(model="b", messages=[{"role": "user", "content": "y"}])
    assert by_name(spans, "chat b").attributes["gen_ai.request.model"] == "b"


def test_entry_span_joins_callers_trace(spans):
    from opentelemetry import trace

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("trainer") as parent:
        ctx = parent.get_span_context()
        traceparent = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01"
    inp = RewardInput(
        agent_output={},
        request_metadata={"job_id": "j", "sample_id": "s", "rollout_id": "ro-7", "attempt_id": "a"},
    )
    with entry_span(inp, {"traceparent": traceparent, "X-Request-Id": "up-1"}):
        Judge().process(inp)
    entry = by_name(spans, "invoke_agentic_rl")
    child = by_name(spans, "invoke_reward Judge")
    assert entry.context.trace_id == ctx.trace_id
    assert entry.parent.span_id == ctx.span_id
    assert child.parent.span_id == entry.context.span_id
    assert entry.attributes["agentic_rl.trace.linked"] == 1
    assert entry.attributes["agentic_rl.upstream.trace_id"] == "up-1"
    assert child.attributes["bailian.agentic_rl.rollout_id"] == "ro-7"
