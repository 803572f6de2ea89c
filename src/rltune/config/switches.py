"""On/off switches read from the environment, as the cloud SDK reads them.

``ENABLE_TRAJECTORY``: whether a job stores its trajectories (``<job_dir>/trajectories/``,
what the console replays). The cloud sets it in a function's ``runtime.env``; rltune reads it
there (any function of the job) and in the job process's environment. ``false``/``0``/``no``/
``off`` anywhere turns storing off; unset means on. Metrics and logs are always kept.

Example:
    >>> from rltune.config import load_job_config_text
    >>> job = load_job_config_text('''
    ... model: tiny
    ... functions:
    ...   - type: reward
    ...     fcmodel: {classpath: "reward.py:R"}
    ...     runtime: {env: {ENABLE_TRAJECTORY: "false"}}
    ... ''')
    >>> trajectories_enabled(job, environ={})
    False
    >>> trajectories_enabled(job.model_copy(update={"functions": []}), environ={})
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional

from rltune.sdk.errors import ConfigError

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
ENABLE_TRAJECTORY = "ENABLE_TRAJECTORY"


def parse_flag(value: Any, where: str) -> Optional[bool]:
    """``True``/``False`` for a boolean-ish value, None for unset/empty; else ``ConfigError``."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ConfigError(f"{where} is {value!r}, not a boolean", where=where,
                      hint=f"use one of {', '.join(TRUE + FALSE)}")


def trajectories_enabled(config: Any = None,
                         environ: Optional[Mapping[str, str]] = None) -> bool:
    """False when ``ENABLE_TRAJECTORY`` is false in the environment or (with the job's
    ``config``) in a function's runtime.env. The one switch for stored trajectories and traces
    (``rltune.observability.tracing``); worker processes inherit the variable."""
    env = os.environ if environ is None else environ
    values = [parse_flag(env.get(ENABLE_TRAJECTORY), ENABLE_TRAJECTORY)]
    for fn in getattr(config, "functions", []):
        runtime_env = (fn.runtime.env or {}) if fn.runtime else {}
        values.append(parse_flag(runtime_env.get(ENABLE_TRAJECTORY),
                                 f"functions[{fn.name}].runtime.env.{ENABLE_TRAJECTORY}"))
    return False not in values
