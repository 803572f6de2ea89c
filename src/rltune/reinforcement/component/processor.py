"""``…reinforcement.component.processor``: the abstract processor classes and the reward
decorators."""

from rltune.sdk import processors, rewards
from rltune.sdk.processors import *  # noqa: F403
from rltune.sdk.rewards import *  # noqa: F403

__all__ = [*processors.__all__, *rewards.__all__]
