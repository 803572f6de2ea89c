"""Lazy package exports: a name's module is imported on first access, not at package import.

Packages that front heavy modules (torch, transformers, FastAPI, httpx) use this so that
``import rltune.x`` stays cheap for the server, the CLI and user code.

Example:
    >>> __getattr__ = lazy_getattr("pkg", {"dumps": "json"})
    >>> __getattr__("dumps")({"a": 1})
    '{"a": 1}'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` resolving ``exports`` (name → module path) lazily."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
