"""Spans kept in the job directory when no OTLP exporter is set.

Every process of a job (trainer, gateway, function workers) writes its finished spans as JSON
lines to ``<job_dir>/traces/<rollout id>.jsonl`` (spans without a rollout id, such as the
step spans, to ``_job.jsonl``). Each line is one ``write()`` to a file opened for appending,
so the processes never interleave inside a line. When the trainer writes a rollout's
trajectory it moves that rollout's spans into the record (``take``).

Sandboxed workers write this folder too, so the trusted processes touch its files only through
``rltune.safefs.TenantFolder``: a link, FIFO or hard link put there is refused (the span is
dropped, or the rollout's record gets no spans, with a warning), and no file holds more than
``MAX_FILE_BYTES``.

Example:
    >>> import tempfile
    >>> store = SpanStore(tempfile.mkdtemp())
    >>> store.append({"name": "rollout", "rollout_id": "r-1", "start": 1.0})
    >>> [s["name"] for s in store.take("r-1")], store.take("r-1")
    (['rollout'], [])
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from rltune.safefs import TenantFolder, UnsafeFileError

log = logging.getLogger("rltune.observability.spanstore")

ROLLOUT_ATTR = "bailian.agentic_rl.rollout_id"
#: The most one span file holds (a rollout's spans are a few kB each).
MAX_FILE_BYTES = 64 * 2**20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_WARNINGS = 20  # a function could plant a link per rollout: the log stays readable


class SpanStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.folder = TenantFolder(self.root, max_bytes=MAX_FILE_BYTES, create=True)
        self._warned: set[str] = set()

    def name_for(self, rollout_id: str | None) -> str:
        name = _UNSAFE.sub("_", rollout_id)[:200] if rollout_id else "_job"
        return f"{name}.jsonl"

    def _warn(self, exc: UnsafeFileError) -> None:
        if len(self._warned) < _MAX_WARNINGS and str(exc) not in self._warned:
            self._warned.add(str(exc))
            log.warning("spans not kept: %s%s", exc, " (no more such warnings)"
                        if len(self._warned) == _MAX_WARNINGS else "")

    def append(self, span: dict[str, Any]) -> None:
        line = (json.dumps(span, default=str) + "\n").encode()
        try:
            self.folder.append(self.name_for(span.get("rollout_id")), line)
        except UnsafeFileError as exc:
            self._warn(exc)

    def take(self, rollout_id: str) -> list[dict[str, Any]]:
        """A rollout's spans, ordered by start time; the file is removed."""
        try:
            data = self.folder.take(self.name_for(rollout_id))
        except UnsafeFileError as exc:
            self._warn(exc)
            return []
        if data is None:
            return []
        spans = []
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                span = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(span, dict):
                spans.append(span)
        return sorted(spans, key=_start)


def _start(span: dict[str, Any]) -> float:
    start = span.get("start")  # a worker wrote it: any JSON value
    return float(start) if isinstance(start, (int, float)) else 0.0
