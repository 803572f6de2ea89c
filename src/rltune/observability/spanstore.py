"""Spans kept in the job directory when no OTLP exporter is set.

Every process of a job (trainer, gateway, function workers) writes its finished spans as JSON
lines to ``<job_dir>/traces/<rollout id>.jsonl`` (spans without a rollout id, such as the
step spans, to ``_job.jsonl``). Each line is one ``write()`` to a file opened for appending,
so the processes never interleave inside a line. When the trainer writes a rollout's
trajectory it moves that rollout's spans into the record (``take``).

Example:
    >>> import tempfile
    >>> store = SpanStore(tempfile.mkdtemp())
    >>> store.append({"name": "rollout", "rollout_id": "r-1", "start": 1.0})
    >>> [s["name"] for s in store.take("r-1")], store.take("r-1")
    (['rollout'], [])
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

ROLLOUT_ATTR = "bailian.agentic_rl.rollout_id"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class SpanStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, rollout_id: str | None) -> Path:
        name = _UNSAFE.sub("_", rollout_id)[:200] if rollout_id else "_job"
        return self.root / f"{name}.jsonl"

    def append(self, span: dict[str, Any]) -> None:
        line = (json.dumps(span, default=str) + "\n").encode()
        fd = os.open(self.path_for(span.get("rollout_id")),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def take(self, rollout_id: str) -> list[dict[str, Any]]:
        """A rollout's spans, ordered by start time; the file is removed."""
        path = self.path_for(rollout_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        path.unlink(missing_ok=True)
        spans = []
        for line in text.splitlines():
            try:
                spans.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return sorted(spans, key=lambda s: s.get("start") or 0.0)
