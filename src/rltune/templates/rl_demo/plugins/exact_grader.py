"""Single grader: 1 when the final answer equals the sample's ``extra.answer``, else 0."""

from __future__ import annotations

from ark_sdk.resources.pipeline_plugin import single_grader
from ark_sdk.types.pipeline_plugin import PluginInstance, Runtime
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext
from ark_sdk.types.pipeline_plugin.rollout import ChatCompletionSample, Trajectory

from plugins.calc_tools import extract_answer


def final_text(trajectory: Trajectory) -> str:
    for message in reversed(trajectory.messages):
        if message.role == "assistant" and isinstance(message.content, str) and message.content:
            return message.content
    return ""


def same_number(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) < 1e-6
    except ValueError:
        return a.strip() == b.strip()


@single_grader(name="exact", runtime=Runtime(instance=PluginInstance.CPU1MEM2,
                                             max_concurrency=64))
def exact_grader(context: PluginContext, sample: ChatCompletionSample,
                 trajectory: Trajectory) -> float:
    answer = extract_answer(final_text(trajectory))
    return float(answer is not None and same_number(answer, str(sample.extra["answer"])))
