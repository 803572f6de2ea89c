"""Exact-answer reward for the calculator agent, with a format sub-score as a metric.

The answer counts only where it ends the final message, as the system prompt asks ("End with
..."): a reward that takes the answer anywhere pays for text after it, and runs that learn
to trail text fall late, most of all with stale rollouts (docs/agentic.md).
"""

from __future__ import annotations

from rltune.models.tasks import answer_at_end
from rltune.sdk import (
    AbstractRewardProcessor,
    Reward,
    RewardInput,
    RewardOutput,
    aggregate_func,
    reward_func,
    sub_reward_func,
)


def final_text(input_data: RewardInput) -> str:
    for message in reversed(input_data.agent_output.messages or []):
        if message.get("role") == "assistant" and message.get("content"):
            return str(message["content"])
    return ""


@reward_func("calc-exact")
class CalcReward(AbstractRewardProcessor):
    @sub_reward_func("correct", 1.0)
    def correct(self, input_data: RewardInput) -> RewardOutput:
        answer = answer_at_end(final_text(input_data))
        truth = str(input_data.ground_truth).strip()
        ok = answer is not None and _same_number(answer, truth)
        return RewardOutput(reward=Reward(reward_score=float(ok)))

    @sub_reward_func("format", 0.0)
    def format(self, input_data: RewardInput) -> RewardOutput:
        ok = answer_at_end(final_text(input_data)) is not None
        return RewardOutput(reward=Reward(reward_score=float(ok)))

    @aggregate_func
    def combine(self, sub_rewards: dict[str, RewardOutput]) -> RewardOutput:
        scores = self.get_scores(sub_rewards)
        return RewardOutput(
            reward=Reward(
                reward_score=self.get_total(sub_rewards),
                reward_metrics={"correct": scores["correct"], "format": scores["format"]},
            )
        )


def _same_number(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) < 1e-6
    except ValueError:
        return a == b
