"""``…reinforcement.component.data``: the function wire models."""

from rltune.reinforcement.component.data import reward_output  # noqa: F401
from rltune.reinforcement.component.data.base_data_model import *  # noqa: F403
from rltune.reinforcement.component.data.base_data_model import __all__  # noqa: F401
