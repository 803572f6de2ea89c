"""Install and remove an import alias: a meta-path finder that serves another package's
module paths (``dashscope.finetune.reinforcement…``, ``ark_sdk…``) from rltune's modules.

Like ``pymysql.install_as_MySQLdb()``: an explicit call, which never shadows a real
installation of the aliased package unless forced. ``rltune.reinforcement.alias`` and
``rltune.ark.alias`` each define their finder and expose ``ImportAlias(top, finder)``'s
``install`` / ``uninstall``.

Example:
    >>> import importlib.abc
    >>> class Nothing(importlib.abc.MetaPathFinder):
    ...     def find_spec(self, fullname, path=None, target=None):
    ...         return None
    >>> alias = ImportAlias("no_such_package_here", Nothing())
    >>> alias.install(), alias.install()
    (True, True)
    >>> alias.uninstall()
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


class ImportAlias:
    """The alias of the top-level package ``top``, served by ``finder``."""

    def __init__(self, top: str, finder: Any):
        self.top = top
        self.finder = finder

    def real_installed(self) -> bool:
        """Whether a real ``top`` package is importable (the alias itself does not count)."""
        if self.finder in sys.meta_path:
            return False
        try:
            return importlib.util.find_spec(self.top) is not None
        except (ImportError, ValueError):
            return False

    def install(self, force: bool = False) -> bool:
        """Serve ``top…`` imports; False (nothing changed) when a real ``top`` is importable
        and ``force`` is False."""
        if self.finder in sys.meta_path:
            return True
        if self.real_installed() and not force:
            return False
        self.uninstall()  # forget modules imported from a real package
        sys.meta_path.insert(0, self.finder)
        return True

    def uninstall(self) -> None:
        """Remove the alias and forget the aliased modules (mainly for tests)."""
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for name in list(sys.modules):
            if name == self.top or name.startswith(self.top + "."):
                del sys.modules[name]
