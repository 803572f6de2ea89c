"""Group grader of Ark's weather demo (``random_reward.py``): a trajectory scores 1 when its
final answer contains the dataset's reference answer (``extra.answer``), else 0; the metric
``hit_rate`` is the share of the group that did."""

from __future__ import annotations

from ark_sdk.resources.pipeline_plugin import group_grader
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext
from ark_sdk.types.pipeline_plugin.rollout import (
    ChatCompletionSample,
    GroupGraderResult,
    Trajectory,
)


def final_answer(trajectory: Trajectory) -> str:
    for message in reversed(trajectory.messages):
        if message.role == "assistant" and isinstance(message.content, str) and message.content:
            return message.content
    return ""


@group_grader(name="random_reward")
def random_reward(context: PluginContext, sample: ChatCompletionSample,
                  trajectories: list[Trajectory]) -> GroupGraderResult:
    answer = str((sample.extra or {}).get("answer", "")).strip().lower()
    rewards = [float(bool(answer) and answer in final_answer(t).lower()) for t in trajectories]
    return GroupGraderResult(rewards=rewards,
                             metrics={"hit_rate": sum(rewards) / max(len(rewards), 1)})
