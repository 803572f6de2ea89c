"""Multi-step calculator reward: the exact final answer, plus partial credit per right call.

``correct`` (weight 1) is 1 for the right ``### ANSWER: <n> ###`` at the end of the final
message, as the system prompt asks: an answer followed by more text scores 0. (When the
answer anywhere counted, sampling at temperature 1.3 drifted into answers trailed by
``### ### ...`` up to the length cap, rewarded whenever the number was right; in one run 57 of
64 final messages, with validation falling from 0.28 to 0.20.) ``steps`` (weight 0.5) is
the share of the chain's results the calculator returned in order from the first call on
(``rollout_extra.steps``), in training only: on validation rollouts (phase ``test``) it scores
0, so the validation reward is the exact-answer rate. Both are reported as metrics always.
"""

from __future__ import annotations

from rltune.models.multistep import steps_right
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


def is_validation(input_data: RewardInput) -> bool:
    meta = input_data.request_metadata
    return meta is not None and meta.phase == "test"


@reward_func("multistep")
class MultiStepReward(AbstractRewardProcessor):
    @sub_reward_func("correct", 1.0)
    def correct(self, input_data: RewardInput) -> RewardOutput:
        answer = answer_at_end(final_text(input_data))
        truth = str(input_data.ground_truth).strip()
        ok = answer is not None and _same_number(answer, truth)
        return RewardOutput(reward=Reward(reward_score=float(ok)))

    @sub_reward_func("steps", 0.5)
    def steps(self, input_data: RewardInput) -> RewardOutput:
        values = (input_data.agent_output.rollout_extra or {}).get("steps") or []
        messages = input_data.agent_output.messages or []
        share = steps_right(messages, values) / len(values) if values else 0.0
        score = 0.0 if is_validation(input_data) else share
        return RewardOutput(reward=Reward(reward_score=score, reward_metrics={"share": share}))

    @aggregate_func
    def combine(self, sub_rewards: dict[str, RewardOutput]) -> RewardOutput:
        scores = self.get_scores(sub_rewards)
        share = (sub_rewards["steps"].reward.reward_metrics or {}).get("share", 0.0)
        return RewardOutput(
            reward=Reward(
                reward_score=self.get_total(sub_rewards),
                reward_metrics={"correct": scores["correct"], "steps_right": share},
            )
        )


def _same_number(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) < 1e-6
    except ValueError:
        return a == b
