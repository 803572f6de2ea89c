"""``…reinforcement.component.data``: the function wire models."""

from rltune.reinforcement.component.data.base_data_model import *  # noqa: F403
from rltune.reinforcement.component.data.base_data_model import __all__ as _base
from rltune.reinforcement.component.data.reward_output import Reward

__all__ = [*_base, "Reward"]
