"""``…reinforcement.component.processor``: the abstract processor classes."""

from rltune.sdk.processors import (
    AbstractGroupRewardProcessor,
    AbstractProcessor,
    AbstractRewardProcessor,
    AbstractRolloutProcessor,
)
from rltune.sdk.rewards import aggregate_func, reward_func, sub_reward_func

__all__ = [
    "AbstractGroupRewardProcessor",
    "AbstractProcessor",
    "AbstractRewardProcessor",
    "AbstractRolloutProcessor",
    "aggregate_func",
    "reward_func",
    "sub_reward_func",
]
