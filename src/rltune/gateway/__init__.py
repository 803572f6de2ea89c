"""The policy gateway: an OpenAI-compatible server over an engine, with token-exact capture.

``Gateway`` (server + keys + capture) and ``build_rows`` (captured calls → training rows) are
the parts other components use. Importing this package loads neither FastAPI nor torch; the
names are resolved on first use.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Gateway": "rltune.gateway.server",
    "CapturedCall": "rltune.gateway.capture",
    "CaptureStore": "rltune.gateway.capture",
    "build_rows": "rltune.gateway.rows",
    "Row": "rltune.gateway.rows",
    "RowBreak": "rltune.gateway.rows",
    "RowsResult": "rltune.gateway.rows",
    "get_parser": "rltune.gateway.toolcalls",
    "register_parser": "rltune.gateway.toolcalls",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
