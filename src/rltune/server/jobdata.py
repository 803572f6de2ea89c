"""Read what a job process writes into its directory: logs, metrics, trajectories,
checkpoints, progress. Plain file reading (no torch), tolerant of a job that is still writing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from rltune.jobdir import LOG_SOURCES, STEP_FILE, JobDir, checkpoint_step, trainer_state_file


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    if not path.is_file():
        return out
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line of a job that is writing
    return out


def read_log_lines(job_dir: Path, offset: int = 1, lines: int = 1000,
                   source: str = "train") -> tuple[list[str], int]:
    """Lines ``offset`` (1-based) .. ``offset+lines-1`` of a log; returns (lines, next_offset).

    Only complete lines (ending in a newline) are returned, so a follower never sees half a line.
    """
    path = job_dir / LOG_SOURCES[source]
    out: list[str] = []
    if not path.is_file():
        return out, offset
    n = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if n < offset:
                continue
            if not line.endswith("\n") or len(out) >= lines:
                break
            out.append(line.rstrip("\n"))
    return out, offset + len(out)


def job_config(job_dir: Path, rec: dict[str, Any]) -> dict[str, Any]:
    """The config as submitted: ``config.json`` in the job's folder (kept out of the store, so
    list pages never load it, and its secrets stay with the job)."""
    try:
        return json.loads(JobDir(job_dir).config.read_text())
    except (OSError, ValueError):
        return rec.get("config") or {}


def read_progress(job_dir: Path) -> Optional[dict[str, Any]]:
    try:
        return json.loads(JobDir(job_dir).progress.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def metric_series(job_dir: Path, names: Optional[list[str]] = None,
                  start_step: Optional[int] = None,
                  end_step: Optional[int] = None) -> dict[str, list[list[float]]]:
    """``{name: [[step, value], ...]}``; a step logged twice (resumed job) keeps its last value."""
    by_step: dict[int, dict[str, Any]] = {}
    for row in _json_lines(JobDir(job_dir).metrics):
        step = int(row.get("step", 0))
        if (start_step is not None and step < start_step) or (
                end_step is not None and step > end_step):
            continue
        by_step.setdefault(step, {}).update(row.get("metrics") or {})
    series: dict[str, list[list[float]]] = {}
    for step in sorted(by_step):
        for name, value in by_step[step].items():
            if names and name not in names:
                continue
            series.setdefault(name, []).append([step, value])
    return series


def latest_metric(job_dir: Path, name: str) -> Optional[float]:
    values = metric_series(job_dir, [name]).get(name)
    return values[-1][1] if values else None


def trajectory_steps(job_dir: Path) -> list[dict[str, int]]:
    root = JobDir(job_dir).trajectories
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = STEP_FILE.match(p.name)
        if m:
            with p.open(encoding="utf-8", errors="replace") as fh:
                count = sum(1 for line in fh if line.endswith("\n"))
            out.append({"step": int(m.group(1)), "count": count})
    return sorted(out, key=lambda s: s["step"])


def list_checkpoints(job_dir: Path) -> list[dict[str, Any]]:
    """Complete checkpoints (those with ``trainer_state.json``), oldest first."""
    found = []
    for p in JobDir(job_dir).complete_checkpoints():
        state_file = trainer_state_file(p)
        try:
            state = json.loads(state_file.read_text())
            created = state_file.stat().st_mtime
        except (OSError, json.JSONDecodeError):
            continue
        found.append({"name": p.name, "step": checkpoint_step(p), "path": str(p),
                      "validation_reward": state.get("validation_reward"),
                      "created_at": created})
    return found
