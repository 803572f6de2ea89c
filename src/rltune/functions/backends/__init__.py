"""Where workers run. ``WorkerBackend`` is the whole interface: local processes now, Ray later."""

from rltune.functions.backends.base import WorkerBackend, WorkerHandle
from rltune.functions.backends.local import LocalProcessBackend

__all__ = ["LocalProcessBackend", "WorkerBackend", "WorkerHandle"]
