"""Make ``import dashscope.finetune.reinforcement…`` resolve to ``rltune.reinforcement…``.

Like ``pymysql.install_as_MySQLdb()``: an explicit call that lets code written for the cloud
SDK run unchanged. It does nothing when the real ``dashscope`` package is installed (unless
``force=True``), so it never shadows a real installation. Function workers call it at start.

Example:
    >>> from rltune.reinforcement import install_as_dashscope
    >>> install_as_dashscope()
    True
    >>> from dashscope.finetune.reinforcement.component.data.base_data_model import TaskStatus
    >>> TaskStatus.__module__
    'rltune.sdk.data'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
from types import ModuleType

from rltune._alias import ImportAlias

# Cloud module prefix → rltune module prefix. Longest prefix wins.
ALIASES: dict[str, str] = {
    "dashscope.finetune.reinforcement": "rltune.reinforcement",
    "dashscope.finetune.agentic_rl": "rltune.client.agentic_rl",
}
# Parents that exist only to hold the aliased modules.
_SYNTHETIC = ("dashscope", "dashscope.finetune")


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves aliased names by returning the rltune module object itself."""

    def _target(self, fullname: str) -> str | None:
        for prefix in sorted(ALIASES, key=len, reverse=True):
            if fullname == prefix or fullname.startswith(prefix + "."):
                return ALIASES[prefix] + fullname[len(prefix) :]
        return None

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[override]
        if fullname in _SYNTHETIC:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        real = self._target(fullname)
        if real is None:
            return None
        try:
            real_spec = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            return None
        if real_spec is None:
            return None
        is_pkg = real_spec.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=is_pkg)

    def create_module(self, spec):  # type: ignore[override]
        if spec.name in _SYNTHETIC:
            return None  # default module creation
        return importlib.import_module(self._target(spec.name))  # type: ignore[arg-type]

    def exec_module(self, module: ModuleType) -> None:
        if module.__name__ in _SYNTHETIC:
            module.__doc__ = (
                "Alias namespace installed by rltune.reinforcement.install_as_dashscope()."
            )
        if module.__name__ == "dashscope":  # `from dashscope import Generation`
            from rltune.sdk.generation import Generation

            module.Generation = Generation  # type: ignore[attr-defined]


_ALIAS = ImportAlias("dashscope", _AliasFinder())


def install_as_dashscope(force: bool = False) -> bool:
    """Install the alias; returns True when ``dashscope…`` imports now resolve to rltune.

    Returns False (and changes nothing) when a real ``dashscope`` is importable and
    ``force`` is False.
    """
    return _ALIAS.install(force)


def real_dashscope() -> str | None:
    """Where a real ``dashscope`` package is installed (that ``import dashscope…`` resolves to
    instead of rltune), or None when rltune's alias serves it or nothing is there."""
    if not _ALIAS.real_installed():
        return None
    spec = importlib.util.find_spec("dashscope")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return (spec.origin if spec and spec.origin else None) or (
        locations[0] if locations else "dashscope")


def dashscope_warning() -> str | None:
    """One warning line when a real ``dashscope`` stands in the way of rltune's, else None."""
    where = real_dashscope()
    if where is None:
        return None
    return (f"warning: a real dashscope package is installed ({where}): `import dashscope…` "
            "resolves to it, not to rltune. Fix: `pip uninstall dashscope` in this "
            "environment, or import rltune.reinforcement instead")


def uninstall_dashscope_alias() -> None:
    """Remove the alias and forget the aliased modules (mainly for tests)."""
    _ALIAS.uninstall()
