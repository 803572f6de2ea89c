"""The policy gateway: an OpenAI-compatible server over an engine, with token-exact capture.

``Gateway`` (server + keys + capture) and ``build_rows`` (captured calls → training rows) are
the parts other components use. Importing this package loads neither FastAPI nor torch; the
names are resolved on first use.
"""

from __future__ import annotations

from rltune._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    ".server": ("Gateway",),
    ".capture": ("CapturedCall", "CaptureStore"),
    ".rows": ("build_rows", "TokenSequence", "RowBreak", "RowsResult"),
    ".toolcalls": ("get_parser", "register_parser", "parser_for_model_type"),
})
