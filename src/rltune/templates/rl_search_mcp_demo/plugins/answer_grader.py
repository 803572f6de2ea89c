"""Single grader without a judge: 1 when the final answer contains the reference answer
(``extra.answer``). Give it the weight in job.yaml to score without an LLM judge."""

from __future__ import annotations

from ark_sdk.resources.pipeline_plugin import single_grader
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext
from ark_sdk.types.pipeline_plugin.rollout import ChatCompletionSample, Trajectory


@single_grader(name="contains_answer")
def contains_answer(context: PluginContext, sample: ChatCompletionSample,
                    trajectory: Trajectory) -> float:
    final = next((m.content for m in reversed(trajectory.messages)
                  if m.role == "assistant" and isinstance(m.content, str)), "") or ""
    return float(str((sample.extra or {}).get("answer", "")).lower() in final.lower())
