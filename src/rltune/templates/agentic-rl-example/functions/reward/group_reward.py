"""The Bailian demo's group reward (``DemoGroupRewardProcessor``): within a prompt's group,
shorter correct-format answers rank higher (a score in [0, 1] per rollout, in order)."""

from __future__ import annotations

from dashscope.finetune.reinforcement import (
    AbstractGroupRewardProcessor,
    GroupReward,
    GroupRewardInput,
    GroupRewardOutput,
    Reward,
)


class DemoGroupRewardProcessor(AbstractGroupRewardProcessor):
    async def process(self, input_data: GroupRewardInput) -> GroupRewardOutput:
        lengths = [len(str((o.messages or [{}])[-1].get("content") or ""))
                   for o in input_data.agent_outputs]
        longest = max(lengths, default=0) or 1
        return GroupRewardOutput(reward=GroupReward(rewards=[
            Reward(reward_score=1.0 - n / longest) for n in lengths]))
