"""``ENABLE_TRAJECTORY``: the one switch for traces (and stored trajectories).

The cloud's docs say tracing is on by default and ``ENABLE_TRAJECTORY=false`` turns it off;
rltune does the same: unset or any other value is on, ``false``/``0``/``no``/``off`` is off.
Worker processes inherit the variable, so one setting covers the whole job.

Example:
    >>> trajectory_enabled({"ENABLE_TRAJECTORY": "false"}), trajectory_enabled({})
    (False, True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

ENV_VAR = "ENABLE_TRAJECTORY"
_OFF = frozenset({"false", "0", "no", "off"})


def trajectory_enabled(environ: Optional[Mapping[str, str]] = None) -> bool:
    """False only when ``ENABLE_TRAJECTORY`` says off."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return value.strip().lower() not in _OFF
