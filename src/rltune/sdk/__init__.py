"""rltune's user-facing SDK: the types, processors and reward decorators user code imports.

This package never imports torch, and imports nothing else of rltune.
"""

from rltune.sdk import data, loader, plain, processors, rewards
from rltune.sdk.data import *  # noqa: F403
from rltune.sdk.loader import *  # noqa: F403
from rltune.sdk.plain import *  # noqa: F403
from rltune.sdk.processors import *  # noqa: F403
from rltune.sdk.rewards import *  # noqa: F403

#: Each module lists its public names once (its ``__all__``); this package is their union.
__all__ = [*data.__all__, *loader.__all__, *plain.__all__, *processors.__all__,
           *rewards.__all__]
