"""Where a training run writes what it observes: metrics, trajectories, logs and progress.

The trainer writes through the small :class:`Sink` interface; :class:`FileSink` keeps
everything under one job directory in append-only JSON lines that the job server and the
console read while the job runs:

    <job_dir>/metrics.jsonl            {"step", "time", "metrics": {name: value}}
    <job_dir>/trajectories/step_000001.jsonl   one trajectory per line
    <job_dir>/train.log                text log
    <job_dir>/progress.json            latest progress (atomically replaced)

Example:
    >>> import tempfile, json, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> sink = FileSink(d)
    >>> sink.metrics(1, {"critic/rewards/mean": 0.5})
    >>> sink.close()
    >>> json.loads((d / "metrics.jsonl").read_text())["metrics"]
    {'critic/rewards/mean': 0.5}
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol


class Sink(Protocol):
    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def trajectories(self, step: int, records: Iterable[dict[str, Any]]) -> None: ...
    def log(self, message: str, level: str = "INFO") -> None: ...
    def progress(self, state: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


def _clean(value: Any) -> Any:
    # JSON has no NaN/inf; keep the line valid and say what it was.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class FileSink:
    """Append-only files under ``job_dir``; safe to call from several threads."""

    def __init__(self, job_dir: str | Path, echo: bool = False, store_trajectories: bool = True):
        self.dir = Path(job_dir)
        self.store_trajectories = store_trajectories  # False: ENABLE_TRAJECTORY=false
        (self.dir / "trajectories").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._metrics = open(self.dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._log = open(self.dir / "train.log", "a", encoding="utf-8")  # noqa: SIM115
        self.echo = echo

    def metrics(self, step: int, values: dict[str, float]) -> None:
        line = {
            "step": step,
            "time": time.time(),
            "metrics": {k: _clean(float(v)) for k, v in values.items()},
        }
        with self._lock:
            self._metrics.write(json.dumps(line) + "\n")
            self._metrics.flush()

    def trajectories(self, step: int, records: Iterable[dict[str, Any]]) -> None:
        if not self.store_trajectories:
            return
        path = self.dir / "trajectories" / f"step_{step:06d}.jsonl"
        with self._lock, open(path, "a", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, default=str) + "\n")

    def log(self, message: str, level: str = "INFO") -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self._lock:
            for line in str(message).splitlines() or [""]:
                self._log.write(f"{stamp} {level:<7} {line}\n")
            self._log.flush()
        if self.echo:
            print(f"{level}: {message}")

    def progress(self, state: dict[str, Any]) -> None:
        tmp = self.dir / "progress.json.tmp"
        tmp.write_text(json.dumps(state, default=str))
        os.replace(tmp, self.dir / "progress.json")

    def close(self) -> None:
        with self._lock:
            self._metrics.close()
            self._log.close()


def read_metrics(job_dir: str | Path) -> list[dict[str, Any]]:
    """All metric lines of a job, skipping a torn last line of a job that is still writing."""
    path = Path(job_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
