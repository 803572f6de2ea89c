"""The folder of one training run, and the name of every file in it (no torch here).

Everything that writes or reads a run's files names them through :class:`JobDir`::

    <job_dir>/job.yaml, job.json, config.json      the job as submitted (job server)
    <job_dir>/metrics.jsonl                         {"step", "time", "metrics": {...}} a line
    <job_dir>/train.log                             the run's log (workers append to it too)
    <job_dir>/process.log                           the job process's stdout/stderr (server)
    <job_dir>/progress.json                         latest progress (atomically replaced)
    <job_dir>/trajectories/step_000001.jsonl        one trajectory a line, a file a step
    <job_dir>/checkpoints/checkpoint-<step>/        trainer_state.json marks it complete
    <job_dir>/result.json                           the job process's outcome (server)
    <job_dir>/ranks/rank-<r>.log                    other trainer ranks' output
    <job_dir>/traces/                               the run's spans
    <job_dir>/stop_request.json                     ``stop``: end at the next step boundary

:func:`read_trainer_state` and :func:`complete_checkpoints` read checkpoints without torch, so
the server, the console and observability can use them.

Example:
    >>> d = JobDir("/tmp/run")
    >>> d.metrics.name, d.trajectory(3).name, d.checkpoint(7).relative_to(d.root).as_posix()
    ('metrics.jsonl', 'step_000003.jsonl', 'checkpoints/checkpoint-7')
    >>> LOG_SOURCES["process"]
    'process.log'
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional, Union

from rltune.paths import CHECKPOINT_NAME, checkpoint_dir, checkpoint_step, checkpoints_root

PathLike = Union[str, Path]
__all__ = ["JobDir", "checkpoint_step", "complete_checkpoints", "read_trainer_state",
           "trainer_state_file"]

METRICS = "metrics.jsonl"
TRAIN_LOG = "train.log"
PROCESS_LOG = "process.log"
PROGRESS = "progress.json"
TRAJECTORIES = "trajectories"
RESULT = "result.json"
TRAINER_STATE = "trainer_state.json"
#: A PPO checkpoint's critic (weights, optimizer, updates done): resume state, not the model.
CRITIC_STATE = "critic.pt"
JOB_YAML = "job.yaml"
JOB_META = "job.json"
CONFIG = "config.json"
RANKS = "ranks"
TRACES = "traces"
ALERTS = "alerts.jsonl"
STOP_REQUEST = "stop_request.json"
#: A log's ``source`` (REST ``?source=``) → its file name.
LOG_SOURCES = {"train": TRAIN_LOG, "process": PROCESS_LOG}
STEP_FILE = re.compile(r"^step_(\d+)\.jsonl$")


def log_lines(message: str, level: str = "INFO") -> str:
    """``message`` as ``train.log`` lines: a time stamp and the level before each line."""
    import time

    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return "".join(f"{stamp} {level:<7} {line}\n" for line in str(message).splitlines() or [""])


def _file(name: str, what: str) -> property:
    """A :class:`JobDir` attribute: the path of ``name`` in the folder."""
    return property(lambda self: self.root / name, doc=f"{what} ({name})")


class JobDir:
    """The paths of one run's folder (``root``); it creates nothing."""

    __slots__ = ("root",)

    metrics = _file(METRICS, "metric lines")
    log = _file(TRAIN_LOG, "the run's log")
    process_log = _file(PROCESS_LOG, "the job process's output")
    progress = _file(PROGRESS, "the latest progress")
    trajectories = _file(TRAJECTORIES, "the trajectory files' folder")
    result = _file(RESULT, "the job process's outcome")
    job_yaml = _file(JOB_YAML, "the runnable job config")
    job_meta = _file(JOB_META, "the job's id and facts")
    config = _file(CONFIG, "the config as submitted")
    ranks = _file(RANKS, "the other trainer ranks' logs")
    traces = _file(TRACES, "the run's spans")
    alerts = _file(ALERTS, "the training doctor's alerts")
    stop_request = _file(STOP_REQUEST, "a request to end at the next step boundary")

    def __init__(self, root: PathLike):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"JobDir({str(self.root)!r})"

    def trajectory(self, step: int) -> Path:
        """The trajectory file of ``step``."""
        return self.trajectories / f"step_{int(step):06d}.jsonl"

    @property
    def checkpoints(self) -> Path:
        return checkpoints_root(self.root)

    def checkpoint(self, step: int) -> Path:
        return checkpoint_dir(self.root, step)

    def complete_checkpoints(self) -> list[Path]:
        """The run's complete checkpoints, oldest step first."""
        return complete_checkpoints(self.checkpoints)

    def append_log(self, message: str, level: str = "INFO") -> None:
        """Add ``message`` to the run's log (before the job process opens it, e.g. the
        warnings of its submit)."""
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(log_lines(message, level))

    def request_stop(self, **facts: Any) -> None:
        """Ask the run to end at its next step boundary with a checkpoint (``stop``); the
        trainer reads it after each step (:meth:`read_stop_request`)."""
        tmp = self.stop_request.with_suffix(".tmp")
        tmp.write_text(json.dumps(facts, default=str))
        tmp.replace(self.stop_request)

    def read_stop_request(self) -> Optional[dict[str, Any]]:
        """The pending stop request's facts, or None when nobody asked the run to stop."""
        try:
            data = json.loads(self.stop_request.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            data = {}  # a request is a request, even when its facts cannot be read
        return data if isinstance(data, dict) else {}


def trainer_state_file(checkpoint: PathLike) -> Path:
    """The file whose presence marks a checkpoint complete."""
    return Path(checkpoint) / TRAINER_STATE


def complete_checkpoints(root: PathLike) -> list[Path]:
    """Complete ``checkpoint-<step>`` folders under ``root`` (a checkpoints folder), oldest
    step first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir()
             and (m := CHECKPOINT_NAME.match(p.name)) and trainer_state_file(p).exists()]
    return [p for _, p in sorted(found)]


def read_trainer_state(checkpoint: PathLike) -> dict[str, Any]:
    """The ``trainer_state.json`` of a checkpoint (step, epoch, data order, tracker ids, ...)."""
    path = trainer_state_file(checkpoint)
    if not path.exists():
        from rltune.sdk.errors import ValidationError

        raise ValidationError(f"{checkpoint} is not a complete checkpoint (no {TRAINER_STATE})",
                              where=str(checkpoint), hint="pick a checkpoint-<step> folder")
    return json.loads(path.read_text())


def read_jsonl(path: PathLike) -> list[Any]:
    """The JSON values of a run file written a line at a time (metrics, alerts), oldest first;
    a torn line (a running job's last one) is skipped, a missing file reads as empty."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
