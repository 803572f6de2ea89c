"""``LOG_LEVEL`` (the cloud SDK's variable) and ``RLTUNE_LOG_LEVEL``: one reading for all.

``RLTUNE_LOG_LEVEL`` wins over ``LOG_LEVEL``; values are case-insensitive (``info``, ``DEBUG``,
``warning``, ``error``, ``critical``); unset means INFO. At DEBUG the client logs each request
with its API key masked.

Example:
    >>> log_level({"LOG_LEVEL": "debug"})
    10
    >>> log_level({})
    20
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Optional

from rltune.sdk.errors import ConfigError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_VARS = ("RLTUNE_LOG_LEVEL", "LOG_LEVEL")


def log_level(environ: Optional[Mapping[str, str]] = None) -> int:
    """The configured level as a ``logging`` number; a bad value raises ``ConfigError``."""
    env = os.environ if environ is None else environ
    for var in _VARS:
        raw = (env.get(var) or "").strip()
        if not raw:
            continue
        name = raw.upper()
        if name == "WARN":
            name = "WARNING"
        if name not in LEVELS:
            raise ConfigError(f"{var}={raw!r} is not a log level", where=var,
                              hint=f"use one of {', '.join(LEVELS)} (any case)")
        return int(getattr(logging, name))
    return logging.INFO


#: Third-party libraries whose INFO lines (one per HTTP request for httpx: one per poll while
#: a command follows a job) are noise on a user's terminal and in a job log: kept at WARNING
#: unless the level is DEBUG. Everything else, the user's own loggers included, logs at the
#: configured level.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "urllib3", "requests", "openai",
                 "anthropic", "h2", "hpack", "filelock", "huggingface_hub", "fsspec", "asyncio",
                 "multipart", "python_multipart", "websockets", "mcp", "botocore")


def quiet_third_party(level: int) -> None:
    """Hold :data:`QUIET_LOGGERS` at WARNING (or at ``level`` when it is DEBUG)."""
    quiet = level if level <= logging.DEBUG else max(level, logging.WARNING)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)


def configure_logging(fmt: str = "%(asctime)s %(levelname)s %(name)s: %(message)s") -> int:
    """Set the root logger up at the configured level (once); returns the level. Third-party
    libraries' INFO lines stay off unless the level is DEBUG."""
    level = log_level()
    logging.basicConfig(level=level, format=fmt)
    logging.getLogger().setLevel(level)
    logging.getLogger("rltune").setLevel(level)
    quiet_third_party(level)
    return level


def mask(secret: Optional[str]) -> str:
    """A key shown in logs: its first 4 characters and its length, never the rest.

    >>> mask("sk-abcdef1234567890")
    'sk-a…(19 chars)'
    """
    if not secret:
        return "<none>"
    return f"{secret[:4]}…({len(secret)} chars)"
