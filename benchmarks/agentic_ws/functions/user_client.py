"""The calc tool agent as users write it: an ``openai`` client made per rollout.

The same agent as ``http_tool.py`` (same loop, tools, service and answers), but the policy is
reached the way an agent's own code usually does it: ``AsyncOpenAI(base_url=..., api_key=...)``
built inside ``process`` for each rollout (its own connection pool, closed when the rollout
ends), with no ``http_client`` shared across rollouts. ``benchmarks/user_client_compare.py``
times it against ``http_tool.HttpToolRollout``.
"""

from __future__ import annotations

from openai import AsyncOpenAI

from functions.http_tool import HttpToolRollout
from rltune.models.tasks import CALCULATOR_TOOL
from rltune.sdk import AgentOutput, RolloutInput, RolloutOutput, TaskStatus


class UserClientRollout(HttpToolRollout):
    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        res = input_data.model_resource
        params = dict(input_data.sampling_params or {})
        max_turns = int(params.pop("max_turns", 3))
        params.pop("timeout", None)
        messages = list(input_data.messages)
        counts = {"tool_calls": 0.0, "tool_failures": 0.0}
        try:
            async with AsyncOpenAI(base_url=res.base_url,
                                   api_key=res.api_key.get_secret_value()) as client:
                await self.loop(client, res.model_name, messages,
                                input_data.tools or [CALCULATOR_TOOL], params, max_turns, counts)
        except Exception as exc:  # the policy endpoint failed: retry this rollout
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input_data.rollout_extra, rollout_metrics=counts))
