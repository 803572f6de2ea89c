"""``…reinforcement.component.data.reward_output``: the reward result models."""

from rltune.sdk.data import GroupReward, GroupRewardOutput, Reward, RewardOutput

__all__ = ["GroupReward", "GroupRewardOutput", "Reward", "RewardOutput"]
