"""Group grader: a small bonus for every trajectory that ends in a well-formed answer.

A sample without ``extra.answer`` cannot be graded, so its whole group is discarded.
"""

from __future__ import annotations

from ark_sdk.resources.pipeline_plugin import group_grader
from ark_sdk.types.pipeline_plugin import GroupGraderResult, PluginInstance, Runtime
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext, PluginStatus
from ark_sdk.types.pipeline_plugin.rollout import ChatCompletionSample, Trajectory

from plugins.calc_tools import extract_answer
from plugins.exact_grader import final_text


@group_grader(name="answered", runtime=Runtime(instance=PluginInstance.CPU1MEM2,
                                               max_concurrency=64))
def answered_grader(context: PluginContext, sample: ChatCompletionSample,
                    trajectories: list[Trajectory]) -> GroupGraderResult:
    if not sample.extra or "answer" not in sample.extra:
        return GroupGraderResult(status=PluginStatus.DISCARD, error="sample has no extra.answer")
    answered = [float(extract_answer(final_text(t)) is not None) for t in trajectories]
    return GroupGraderResult(rewards=[0.1 * a for a in answered],
                             metrics={"answered": sum(answered) / len(answered)},
                             status=PluginStatus.SUCCESS, error="")
