"""rltune: self-hosted reinforcement-learning fine-tuning of LLM agents.

The user SDK is re-exported here, so ``from rltune import AbstractRolloutProcessor`` works.
"""

from rltune.sdk import *  # noqa: F403
from rltune.sdk import __all__ as _sdk_all

__version__ = "0.1.0"
__all__ = [*_sdk_all, "__version__"]
