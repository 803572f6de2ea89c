"""The agentic benchmark's tool agent: the calc agent whose ``calculator`` is a remote HTTP
service (``benchmarks/_tool_service.py``, URL in ``$TOOL_URL``) with latency and failures.

A failed tool call (503, timeout) is a tool error message the model reads, as an agent
framework would report it; the rollout fails (and is retried by the platform) only when the
policy endpoint itself fails.
"""

from __future__ import annotations

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
    def setup(self) -> None:
        self.http = httpx.AsyncClient(timeout=120.0)
        self.tool = httpx.AsyncClient(timeout=TOOL_TIMEOUT_S)
        self.tool_url = os.environ["TOOL_URL"].rstrip("/") + "/calculator"

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        res = input_data.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value(),
                             http_client=self.http)
        params = dict(input_data.sampling_params or {})
        max_turns = int(params.pop("max_turns", 3))
        params.pop("timeout", None)
        messages = list(input_data.messages)
        tools = input_data.tools or [CALCULATOR_TOOL]
        calls = failures = 0
        try:
            for _ in range(max_turns):
                response = await client.chat.completions.create(
                    model=res.model_name, messages=messages, tools=tools, **params)
                message = response.choices[0].message
                messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    calls += 1
                    content = await self.run_tool(call)
                    failures += content.startswith("error: tool")
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": content})
        except Exception as exc:  # the policy endpoint failed: retry this rollout
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input_data.rollout_extra,
            rollout_metrics={"tool_calls": float(calls), "tool_failures": float(failures)}))

    async def run_tool(self, call) -> str:
        if call.function.name != "calculator":
            return f"error: unknown tool {call.function.name}"
        try:
            expression = json.loads(call.function.arguments)["expression"]
        except Exception as exc:
            return f"error: {exc}"
        try:
            resp = await self.tool.post(self.tool_url, json={"expression": str(expression)})
        except httpx.HTTPError as exc:
            return f"error: tool call failed: {type(exc).__name__}"
        if resp.status_code != 200:
            return f"error: tool service answered {resp.status_code}"
        return str(resp.json().get("result", ""))
