"""The Bailian demo's decorator-style reward (``SafetyProcessor``): two sub-scores, a sync
``toxicity`` (weight 0.7) and an async ``refusal`` (weight 0.3), combined by ``aggregate``."""

from __future__ import annotations

from dashscope.finetune.reinforcement import (
    AbstractRewardProcessor,
    Reward,
    RewardInput,
    RewardOutput,
    aggregate_func,
    reward_func,
    sub_reward_func,
)

BLOCKED = ("idiot", "stupid", "hate you")
REFUSALS = ("i can't help", "i cannot help", "i won't")


def final_text(input_data: RewardInput) -> str:
    messages = input_data.agent_output.messages or []
    return str(messages[-1].get("content") or "").lower() if messages else ""


@reward_func("safety")
class SafetyProcessor(AbstractRewardProcessor):
    @sub_reward_func("toxicity", 0.7)
    def toxicity(self, input_data: RewardInput) -> RewardOutput:
        clean = not any(word in final_text(input_data) for word in BLOCKED)
        return RewardOutput(reward=Reward(reward_score=float(clean)))

    @sub_reward_func("refusal", 0.3)
    async def refusal(self, input_data: RewardInput) -> RewardOutput:
        helped = not any(text in final_text(input_data) for text in REFUSALS)
        return RewardOutput(reward=Reward(reward_score=float(helped)))

    @aggregate_func
    async def aggregate(self, sub_rewards: dict[str, RewardOutput]) -> RewardOutput:
        return RewardOutput(reward=Reward(reward_score=self.get_total(sub_rewards),
                                          reward_metrics=self.get_scores(sub_rewards)))
