"""Where a training run writes what it observes: metrics, trajectories, logs and progress.

The trainer writes through the small :class:`Sink` interface (built by ``build_sink``);
:class:`FileSink` keeps everything under one job directory in JSON lines that the job server
and the console read while the job runs (the names come from ``rltune.jobdir``):

    <job_dir>/metrics.jsonl            {"step", "time", "metrics": {name: value}}
    <job_dir>/trajectories/step_000001.jsonl   one trajectory per line
    <job_dir>/train.log                text log
    <job_dir>/progress.json            latest progress (atomically replaced)

A step's outputs are idempotent: writing metrics or trajectories for a step that already has
them (a resumed job replaying a step that ran after its checkpoint) replaces them, so a step
appears once. Both files are replaced atomically; readers never see a half-written step.

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

from rltune.jobdir import JobDir, log_lines, read_jsonl


class Sink(Protocol):
    """Everything the training loop writes to (``trainer/loop.py`` calls nothing else)."""

    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def trajectories(self, step: int, records: Iterable[dict[str, Any]]) -> None: ...
    def log(self, message: str, level: str = "INFO") -> None: ...
    def progress(self, state: dict[str, Any]) -> None: ...
    def alert(self, step: int, code: str, title: str, text: str) -> None:
        """A training-doctor alert at ``step`` (``rltune.doctor``; ``text`` is its line)."""
        ...
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
        self.files = JobDir(self.dir)
        self.store_trajectories = store_trajectories  # False: ENABLE_TRAJECTORY=false
        self.files.trajectories.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._metrics_path = self.files.metrics
        self._steps = {line["step"] for line in read_metrics(self.dir)}  # steps on disk
        self._metrics = open(self._metrics_path, "a", encoding="utf-8")  # noqa: SIM115
        self._log = open(self.files.log, "a", encoding="utf-8")  # noqa: SIM115
        self.echo = echo

    def metrics(self, step: int, values: dict[str, float]) -> None:
        line = {
            "step": step,
            "time": time.time(),
            "metrics": {k: _clean(float(v)) for k, v in values.items()},
        }
        with self._lock:
            if step in self._steps:
                self._drop_metrics(step)
            self._metrics.write(json.dumps(line) + "\n")
            self._metrics.flush()
            self._steps.add(step)

    def _drop_metrics(self, step: int) -> None:
        """Rewrite metrics.jsonl without the lines of ``step`` (a replayed step)."""
        self._metrics.close()
        kept = [line for line in self._metrics_path.read_text(encoding="utf-8").splitlines(True)
                if _step_of(line) != step]
        tmp = self._metrics_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, self._metrics_path)
        self._metrics = open(self._metrics_path, "a", encoding="utf-8")  # noqa: SIM115

    def trajectories(self, step: int, records: Iterable[dict[str, Any]]) -> None:
        if not self.store_trajectories:
            return
        path = self.files.trajectory(step)
        tmp = path.with_suffix(".jsonl.tmp")
        with self._lock:
            with open(tmp, "w", encoding="utf-8") as fh:
                for record in records:
                    fh.write(json.dumps(record, default=str) + "\n")
            os.replace(tmp, path)

    def log(self, message: str, level: str = "INFO") -> None:
        with self._lock:
            self._log.write(log_lines(message, level))
            self._log.flush()
        if self.echo:
            print(f"{level}: {message}")

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        """Nothing more to write: the doctor's ``alerts.jsonl`` already holds the alert and
        the loop logs its line to ``train.log``."""

    def progress(self, state: dict[str, Any]) -> None:
        path = self.files.progress
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, default=str))
        os.replace(tmp, path)

    def close(self) -> None:
        with self._lock:
            self._metrics.close()
            self._log.close()


def build_sink(job_dir: str | Path, config: Any = None) -> Sink:
    """The sink a job writes to (the one place sinks are built). With the job's ``config``,
    ``ENABLE_TRAJECTORY=false`` (``rltune.config.switches``) turns trajectory files off."""
    from rltune.config.switches import trajectories_enabled

    keep = trajectories_enabled(config) if config is not None else True
    return FileSink(job_dir, store_trajectories=keep)


def _step_of(line: str) -> Any:
    try:
        return json.loads(line).get("step")
    except (json.JSONDecodeError, AttributeError):
        return None  # a torn line: kept as it is (readers skip it)


def read_metrics(job_dir: str | Path) -> list[dict[str, Any]]:
    """All metric lines of a job, skipping a torn last line of a job that is still writing."""
    return read_jsonl(JobDir(job_dir).metrics)
