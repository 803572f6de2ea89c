"""1 when the final answer contains the expected answer (case-insensitive), else 0."""

from __future__ import annotations

from rltune.models.tasks import extract_answer
from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput


class SearchReward(AbstractRewardProcessor):
    def process(self, input_data: RewardInput) -> RewardOutput:
        final = next((m.get("content") or "" for m in
                      reversed(input_data.agent_output.messages or [])
                      if m.get("role") == "assistant"), "")
        answer = extract_answer(final) or final
        truth = str(input_data.ground_truth or "").lower()
        ok = bool(truth) and truth in answer.lower()
        return RewardOutput(reward=Reward(reward_score=float(ok),
                                          reward_metrics={"answered": float(bool(answer))}))
