"""Where workers run. ``WorkerBackend`` is the whole interface: local processes or Ray actors
(``rltune.functions.backends.ray_backend``, imported only when a job asks for it)."""

from __future__ import annotations

from typing import Any

from rltune.functions.backends.base import WorkerBackend, WorkerHandle
from rltune.functions.backends.local import LocalProcessBackend


def backend_for(config: Any = None, *, as_user: bool = False) -> WorkerBackend:
    """The backend a job's ``function_backend`` names (None or ``local``: local processes,
    run as the user when ``as_user``, see ``LocalProcessBackend``)."""
    if config is None or config.type == "local":
        return LocalProcessBackend(as_user=as_user)
    from rltune.functions.backends.ray_backend import RayBackend

    return RayBackend(config.address)


__all__ = ["LocalProcessBackend", "WorkerBackend", "WorkerHandle", "backend_for"]
