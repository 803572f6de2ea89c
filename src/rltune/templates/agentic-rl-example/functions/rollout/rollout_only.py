"""The Bailian demo's simple rollout (``DemoRolloutProcessor``) with the tracing calls: the
client is traced (``trace_client``), the tool (``observe_tool``) and the processor
(``observe_processor``) make spans. One model call; when it asks for the calculator, the
tool's result and one more call. Imports only the cloud SDK's names and openai."""

from __future__ import annotations

from dashscope.finetune.reinforcement import (
    AbstractRolloutProcessor,
    RolloutInput,
    RolloutOutput,
)
from dashscope.finetune.reinforcement.component.data.base_data_model import (
    AgentOutput,
    TaskStatus,
)
from dashscope.finetune.reinforcement.component.observability import (
    observe_processor,
    observe_tool,
    trace_client,
)
from openai import AsyncOpenAI

from functions.rollout.rollout import TOOL, calculator


@observe_tool
def calculator_tool(arguments: str) -> str:
    return calculator(arguments)


class DemoRolloutProcessor(AbstractRolloutProcessor):
    @observe_processor
    async def process(self, input: RolloutInput) -> RolloutOutput:
        res = input.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value())
        trace_client(client)  # every call of this client is a span
        params = {k: v for k, v in (input.sampling_params or {}).items()
                  if k not in ("max_turns", "timeout")}
        messages = list(input.messages or [])
        try:
            for _ in range(2):
                reply = await client.chat.completions.create(
                    model=res.model_name, messages=messages, tools=input.tools or [TOOL],
                    **params)
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": calculator_tool(call.function.arguments)})
        except Exception as exc:
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input.rollout_extra, reward_score=0.0,
            rollout_metrics={"turns": float(len(messages))}), status=TaskStatus.SUCCESS)
