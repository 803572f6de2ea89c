"""The backend interface the pool drives: start a worker, watch it, stop it.

A backend knows nothing about scaling or retries; the pool decides, the backend executes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

from rltune.functions.spec import FunctionComponentSpec


class WorkerHandle(ABC):
    """One running worker: its ``/api/v1`` URL and the means to watch and end it."""

    worker_id: str
    base_url: str  # http://127.0.0.1:PORT
    pid: Optional[int]
    #: The secret every request to the worker must carry (``rltune.functions.auth``).
    token: Optional[str] = None
    #: Seconds the pool waits for ``is_alive()`` to turn False after the worker's connection
    #: dropped (a process exit shows at once; a remote actor's death takes longer to report).
    death_notice_s: float = 0.25

    @property
    def url(self) -> str:
        return f"{self.base_url}/api/v1"

    @abstractmethod
    def is_alive(self) -> bool:
        """False once the worker has exited (for any reason)."""

    @abstractmethod
    def exit_description(self) -> str:
        """How it ended, in words (exit code or signal), for error messages."""

    @abstractmethod
    def rss_bytes(self) -> int:
        """Resident memory of the worker and its children; 0 when it is gone."""

    def process_count(self) -> int:
        """The worker's processes (it and its descendants) at the last ``rss_bytes``; 0 when
        the backend does not know."""
        return 0

    @abstractmethod
    def kill(self) -> None:
        """End it now (SIGKILL or equivalent)."""

    @abstractmethod
    async def stop(self, grace: float = 3.0) -> None:
        """End it politely, killing it after ``grace`` seconds."""

    def log_tail(self, n_chars: int = 2000) -> str:
        """The last output of the worker, if the backend keeps it."""
        return ""


class WorkerBackend(ABC):
    """Starts workers for a component spec."""

    @abstractmethod
    async def start_worker(self, spec: FunctionComponentSpec, worker_id: str) -> WorkerHandle:
        """Start one worker and return once it serves; raise ``UserCodeError`` if setup fails."""

    def fit_runtime(self, runtime: Any, name: str) -> Any:
        """``runtime`` with its capacities capped at what this backend can run (as is here)."""
        return runtime

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release backend resources (all workers are already stopped)."""
