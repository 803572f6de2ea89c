"""The agentic benchmark's tool agent: the calc agent whose ``calculator`` is a remote HTTP
service (``benchmarks/_tool_service.py``, URL in ``$TOOL_URL``) with latency and failures.

A failed tool call (503, timeout) is a tool error message the model reads, as an agent
framework would report it; the rollout fails (and is retried by the platform) only when the
policy endpoint itself fails.
"""

from __future__ import annotations

import asyncio
import json
import os

import httpx
from openai import AsyncOpenAI

from rltune.models.tasks import CALCULATOR_TOOL
from rltune.sdk import (
    AbstractRolloutProcessor,
    AgentOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)

TOOL_TIMEOUT_S = 10.0


class HttpToolRollout(AbstractRolloutProcessor):
    #: model calls per episode unless the sampling parameters say ``max_turns``
    max_turns = 3

    def setup(self) -> None:
        self.http = httpx.AsyncClient(timeout=120.0)
        self.tool = httpx.AsyncClient(timeout=TOOL_TIMEOUT_S)
        self.tool_url = os.environ["TOOL_URL"].rstrip("/") + "/calculator"

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        res = input_data.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value(),
                             http_client=self.http)
        params = dict(input_data.sampling_params or {})
        max_turns = int(params.pop("max_turns", self.max_turns))
        params.pop("timeout", None)
        messages = list(input_data.messages)
        tools = input_data.tools or [CALCULATOR_TOOL]
        counts = {"tool_calls": 0.0, "tool_failures": 0.0}
        try:
            await self.loop(client, res.model_name, messages, tools, params, max_turns, counts)
        except Exception as exc:  # the policy endpoint failed: retry this rollout
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input_data.rollout_extra, rollout_metrics=counts))

    async def loop(self, client, model: str, messages: list, tools: list, params: dict,
                   max_turns: int, counts: dict) -> None:
        """Model turn, then that turn's tool calls (concurrently), until a plain answer."""
        turn = 0
        while turn < max_turns:
            turn += 1
            reply = (await client.chat.completions.create(
                model=model, messages=messages, tools=tools, **params)).choices[0].message
            messages.append(reply.model_dump(exclude_none=True, exclude={"refusal"}))
            pending = reply.tool_calls or []
            if not pending:
                return
            results = await asyncio.gather(*(self.run_tool(c) for c in pending))
            counts["tool_calls"] += len(pending)
            counts["tool_failures"] += sum(r.startswith("error: tool") for r in results)
            messages.extend({"role": "tool", "tool_call_id": c.id, "content": r}
                            for c, r in zip(pending, results, strict=True))

    async def run_tool(self, call) -> str:
        """The service's answer, or an error message the model reads."""
        args = _arguments(call)
        if "expression" not in args:
            return f"error: not a calculator call: {call.function.name} {args.get('why', '')}"
        try:
            resp = await self.tool.post(self.tool_url, json={"expression": args["expression"]})
        except httpx.HTTPError as exc:
            return f"error: tool call failed: {type(exc).__name__}"
        if resp.status_code != 200:
            return f"error: tool service answered {resp.status_code}"
        return str(resp.json().get("result", ""))


def _arguments(call) -> dict:
    """``{"expression": ...}`` of a calculator call, else ``{"why": ...}``."""
    if call.function.name != "calculator":
        return {"why": "(unknown tool)"}
    try:
        return {"expression": str(json.loads(call.function.arguments)["expression"])}
    except Exception as exc:  # the model wrote bad arguments: tell it
        return {"why": f"({exc})"}
