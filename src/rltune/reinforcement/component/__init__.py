"""``…reinforcement.component``: processors and data models under the cloud SDK's path."""

from rltune.reinforcement.component.processor import *  # noqa: F403
from rltune.reinforcement.component.processor import __all__  # noqa: F401
