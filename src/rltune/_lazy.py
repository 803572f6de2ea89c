"""Lazy package exports: a name's module is imported on first access, not at package import.

Packages that front heavy modules (torch, transformers, FastAPI, httpx) use this so that
``import rltune.x`` stays cheap for the server, the CLI and user code.

A package lists its exports by module with :func:`lazy_exports`::

    __all__, __getattr__ = lazy_exports(__name__, {".server": ("Gateway",), ...})

Example:
    >>> __getattr__ = lazy_getattr("pkg", {"dumps": "json"})
    >>> __getattr__("dumps")({"a": 1})
    '{"a": 1}'
    >>> names, get = lazy_exports("os", {".path": ("join", "basename")})
    >>> names, get("basename")("/a/b")
    (['basename', 'join'], 'b')
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


def lazy_exports(package: str, by_module: dict[str, tuple[str, ...]]
                 ) -> tuple[list[str], Callable[[str], Any]]:
    """``(__all__, __getattr__)`` for a package exporting ``by_module`` (module path, or
    ``.name`` relative to ``package`` → the names it provides), each imported on first use."""
    exports = {name: package + module if module.startswith(".") else module
               for module, names in by_module.items() for name in names}
    return sorted(exports), lazy_getattr(package, exports)
