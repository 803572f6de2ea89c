"""The cloud Agentic-RL SDK's names and module paths, backed by rltune.

Code written for ``dashscope.finetune.reinforcement`` runs with the import changed to
``rltune.reinforcement`` — or unchanged, after :func:`install_as_dashscope`.

Example:
    >>> from rltune.reinforcement import AbstractRolloutProcessor, TaskStatus
    >>> TaskStatus.SUCCESS.value
    'success'
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from rltune.reinforcement.alias import install_as_dashscope, uninstall_dashscope_alias
from rltune.sdk import *  # noqa: F403
from rltune.sdk import __all__ as _SDK_NAMES
from rltune.sdk.errors import ConfigError as ConfigurationError
from rltune.sdk.errors import RltuneError as AgenticRLError
from rltune.sdk.errors import UserCodeError as FunctionLoadError
from rltune.sdk.errors import ValidationError

logger = logging.getLogger("rltune.reinforcement")

# Job-configuration names live in rltune.config (pydantic, no torch); they are resolved on
# first access so that importing user-function types stays cheap.
_CONFIG_NAMES = (
    "FunctionComponentModel",
    "FunctionComponentRuntime",
    "AgenticRLFunctionComponent",
    "RolloutFunctionComponent",
    "RewardFunctionComponent",
    "GroupRewardFunctionComponent",
    "Dataset",
    "TrainingDataset",
    "ValidationDataset",
    "MountStorage",
    "FoundationModel",
    "Training",
    "Observability",
    "TuningModel",
    "DataSourceType",
    "DatasetsType",
    "TrainingType",
)


def __getattr__(name: str) -> Any:
    if name in _CONFIG_NAMES:
        value = getattr(importlib.import_module("rltune.config"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rltune.reinforcement' has no attribute {name!r}")


InputError = ValidationError
OutputError = ValidationError

__all__ = [
    *_SDK_NAMES,
    "AgenticRLError",
    "ConfigurationError",
    "FunctionLoadError",
    "InputError",
    "OutputError",
    "ValidationError",
    "install_as_dashscope",
    "logger",
    "uninstall_dashscope_alias",
    *_CONFIG_NAMES,
]
