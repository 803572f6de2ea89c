"""``…reinforcement.component.data.base_data_model``: inputs, outputs and enums."""

from rltune.sdk.data import *  # noqa: F403
from rltune.sdk.data import __all__  # noqa: F401
