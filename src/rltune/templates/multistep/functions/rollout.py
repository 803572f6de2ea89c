"""Multi-step calculator agent: like the calc template's, with room for a 4-call chain.

It asks the policy, runs its ``calculator`` tool calls, and loops until it answers or has made
``MAX_TURNS`` model calls (``max_turns`` in the sampling parameters overrides it).

The policy is reached only through the OpenAI-compatible endpoint in ``model_resource``; the
platform records the sampled tokens there, so this code never handles tokens. ``trace_client``
and ``observe_tool`` put the LLM and tool calls into the rollout's trace (a no-op when tracing
is off, ``ENABLE_TRAJECTORY=false``).
"""

from __future__ import annotations

import json

import httpx
from openai import AsyncOpenAI

from rltune.models.tasks import CALCULATOR_TOOL, calculate
from rltune.sdk import (
    AbstractRolloutProcessor,
    AgentOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)
from rltune.sdk.tracing import observe_tool, trace_client

#: A chain of up to 4 calls, then the answer.
MAX_TURNS = 5


class MultiStepRollout(AbstractRolloutProcessor):
    def setup(self) -> None:
        # One connection pool per worker; each rollout brings its own key and base URL.
        self.http = httpx.AsyncClient(timeout=120.0)

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        res = input_data.model_resource
        client = trace_client(AsyncOpenAI(
            base_url=res.base_url, api_key=res.api_key.get_secret_value(), http_client=self.http
        ))
        params = dict(input_data.sampling_params or {})
        max_turns = int(params.pop("max_turns", MAX_TURNS))
        params.pop("timeout", None)
        messages = list(input_data.messages)
        tools = input_data.tools or [CALCULATOR_TOOL]
        tool_calls = 0
        try:
            for _ in range(max_turns):
                response = await client.chat.completions.create(
                    model=res.model_name, messages=messages, tools=tools, **params
                )
                message = response.choices[0].message
                messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    tool_calls += 1
                    messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": run_tool(call)}
                    )
        except Exception as exc:  # the policy endpoint failed: retry this rollout, never score it
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(
            agent_output=AgentOutput(
                messages=messages,
                rollout_extra=input_data.rollout_extra,
                rollout_metrics={"tool_calls": float(tool_calls)},
            )
        )


def run_tool(call) -> str:
    """Run one calculator call; a bad call becomes an error message the model can read."""
    if call.function.name != "calculator":
        return f"error: unknown tool {call.function.name}"
    try:
        expression = json.loads(call.function.arguments)["expression"]
    except Exception as exc:
        return f"error: {exc}"
    return calculator(str(expression))


@observe_tool(name="calculator")
def calculator(expression: str) -> str:
    try:
        return calculate(expression)
    except Exception as exc:
        return f"error: {exc}"
