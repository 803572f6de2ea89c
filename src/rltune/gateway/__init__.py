"""The policy gateway: an OpenAI-compatible server over an engine, with token-exact capture.

``Gateway`` (server + keys + capture) and ``build_rows`` (captured calls → training rows) are
the parts other components use. Importing this package loads neither FastAPI nor torch; the
names are resolved on first use.
"""

from __future__ import annotations

from rltune._lazy import lazy_getattr

_EXPORTS = {
    "Gateway": "rltune.gateway.server",
    "CapturedCall": "rltune.gateway.capture",
    "CaptureStore": "rltune.gateway.capture",
    "build_rows": "rltune.gateway.rows",
    "TokenSequence": "rltune.gateway.rows",
    "RowBreak": "rltune.gateway.rows",
    "RowsResult": "rltune.gateway.rows",
    "get_parser": "rltune.gateway.toolcalls",
    "register_parser": "rltune.gateway.toolcalls",
    "parser_for_model_type": "rltune.gateway.toolcalls",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
