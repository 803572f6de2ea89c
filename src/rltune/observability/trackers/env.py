"""Each tracker's own environment variables, used for an option the job's YAML leaves unset.

The YAML wins, then the tracker's variable (the first one set, in the order below), then the
rltune default of docs/observability.md. trackio reads its variables (``TRACKIO_DIR``,
``TRACKIO_SERVER_URL``, ``TRACKIO_SPACE_ID``) itself, as rltune never passes those options.

Example:
    >>> from rltune.config.observability import TrackerConfig
    >>> option(TrackerConfig(type="wandb", mode="online"), "mode", {"WANDB_MODE": "offline"})
    'online'
    >>> option(TrackerConfig(type="wandb"), "mode", {"WANDB_MODE": "offline"})
    'offline'
    >>> option(TrackerConfig(type="mlflow"), "project", {})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

from rltune.config.observability import TrackerConfig

#: tracker -> option -> the tracker's own environment variables for it, first set wins.
TRACKER_ENV: dict[str, dict[str, tuple[str, ...]]] = {
    "wandb": {"mode": ("WANDB_MODE",), "project": ("WANDB_PROJECT",),
              "entity": ("WANDB_ENTITY",), "dir": ("WANDB_DIR",)},
    "mlflow": {"uri": ("MLFLOW_TRACKING_URI",), "project": ("MLFLOW_EXPERIMENT_NAME",)},
    "swanlab": {"mode": ("SWANLAB_MODE",), "project": ("SWANLAB_PROJ_NAME", "SWANLAB_PROJECT"),
                "dir": ("SWANLAB_LOG_DIR", "SWANLAB_LOGDIR")},
    "tensorboard": {},
    "trackio": {},
}


def option(cfg: TrackerConfig, key: str,
           environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """``cfg.<key>`` if the YAML sets it, else the tracker's environment variable, else None."""
    value = getattr(cfg, key)
    if value is not None:
        return value
    env = os.environ if environ is None else environ
    for name in TRACKER_ENV[cfg.type].get(key, ()):
        if env.get(name):
            return env[name]
    return None
