"""Clients we did not write: LangChain ``ChatOpenAI.bind_tools`` and a LangGraph agent ⇄
ToolNode loop, against a real gateway. The fast tests use the untrained tiny model (plumbing);
the others use the warm-started nano calculator agent (built once per test session), whose tool
calls must come back parsed and whose whole agent loop must merge into one token-exact row."""

from __future__ import annotations

import json

import openai
import pytest

from rltune.gateway import build_rows
from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT, calculate

pytest.importorskip("langgraph")
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

QUESTION = "What is 7 * 8?"  # the demo models learned single-digit questions


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses."""
    return calculate(expression)


def build_agent(base_url: str, key: str):
    """Agent ⇄ ToolNode loop: the first turn must call the calculator (tool_choice="required",
    served by forced-prefix decoding), later turns must answer (tool_choice="none"), so the
    loop ends even with a weak model."""
    # The async API matters: the server runs in this test's event loop.
    base = ChatOpenAI(model="policy", base_url=base_url, api_key=key, temperature=0,
                      max_tokens=48)
    first = base.bind_tools([CALCULATOR_TOOL], tool_choice="required")
    later = base.bind_tools([CALCULATOR_TOOL], tool_choice="none")

    async def agent(state: MessagesState):
        used_tool = any(isinstance(m, ToolMessage) for m in state["messages"])
        llm = later if used_tool else first
        return {"messages": [await llm.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([calculator]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "agent")
    return g.compile()


def start_messages():
    return [SystemMessage(SYSTEM_PROMPT), HumanMessage(QUESTION)]


async def test_langchain_and_langgraph_plumbing_tiny(gateway):
    gateway.register("lg-key", "lg")
    llm = ChatOpenAI(model="policy", base_url=gateway.base_url, api_key="lg-key",
                     temperature=0, max_tokens=8)
    msg = await llm.bind_tools([CALCULATOR_TOOL]).ainvoke(start_messages())
    assert isinstance(msg, AIMessage)
    assert msg.response_metadata["finish_reason"] in ("stop", "length", "tool_calls")
    out = await build_agent(gateway.base_url, "lg-key").ainvoke(
        {"messages": start_messages()}, {"recursion_limit": 6})
    assert isinstance(out["messages"][-1], AIMessage)
    assert len(gateway.calls("lg")) >= 2


@pytest.fixture
async def nano_gateway(nano_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(nano_model_dir, threads=2)
    gw = await Gateway.start(engine, static_keys=("serve-key",))
    yield gw
    await gw.stop(close_engine=True)


async def test_openai_client_gets_parsed_tool_calls(nano_gateway):
    client = openai.AsyncOpenAI(base_url=nano_gateway.base_url, api_key="serve-key")
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": QUESTION}]
    # auto: the warm-started model calls the calculator on part of its samples
    r = await client.chat.completions.create(model="policy", messages=messages,
                                             tools=[CALCULATOR_TOOL], temperature=1.0,
                                             max_tokens=48, n=16, seed=0)
    called = [c for c in r.choices if c.finish_reason == "tool_calls"]
    assert called, [c.message.content for c in r.choices]
    for c in called:
        assert c.message.tool_calls[0].function.name == "calculator"
        assert "expression" in json.loads(c.message.tool_calls[0].function.arguments)
    # required: forced-prefix decoding; the call comes back parsed, also when streamed
    kw = dict(model="policy", messages=messages, tools=[CALCULATOR_TOOL], temperature=0,
              max_tokens=48, tool_choice="required")
    r = await client.chat.completions.create(**kw)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    call = choice.message.tool_calls[0]
    assert call.function.name == "calculator" and choice.message.content is None
    assert "expression" in json.loads(call.function.arguments)
    stream = await client.chat.completions.create(**kw, stream=True)
    names, args, reasons, content = [], "", [], ""
    async for chunk in stream:
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for tc in ch.delta.tool_calls or []:
                names.append(tc.function.name)
                args += tc.function.arguments or ""
            if ch.finish_reason:
                reasons.append(ch.finish_reason)
    assert names == ["calculator"] and args == call.function.arguments
    assert reasons == ["tool_calls"] and content == ""


async def test_langgraph_agent_loop_is_one_exact_row(nano_gateway):
    nano_gateway.register("agent-key", "agent-rollout")
    out = await build_agent(nano_gateway.base_url, "agent-key").ainvoke(
        {"messages": start_messages()}, {"recursion_limit": 8})
    msgs = out["messages"]
    first_ai = next(m for m in msgs if isinstance(m, AIMessage))
    assert first_ai.tool_calls and first_ai.tool_calls[0]["name"] == "calculator"
    assert any(isinstance(m, ToolMessage) for m in msgs)
    assert isinstance(msgs[-1], AIMessage) and not msgs[-1].tool_calls
    calls = nano_gateway.pop_calls("agent-rollout")
    assert len(calls) >= 2
    res = build_rows(calls)
    assert res.template_rewrites == 0 and len(res.rows) == 1
    row = res.rows[0]
    picked = [t for t, m in zip(row.input_ids, row.loss_mask, strict=True) if m]
    assert picked == [t for c in calls for t in c.completion_ids]
