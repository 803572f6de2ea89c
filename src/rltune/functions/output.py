"""A function's own output, tagged and kept: ``print``, ``sys.stderr`` and log records of user
code inside a worker become lines ``<time> <LEVEL> [fn <function> <rollout id>] <text>``.

Each line goes to the worker's own stream (its log, whose tail explains a crash) and, in a
job, is appended to the job's log (``--job-log``, the ``train.log`` that the REST route
``GET /v1/jobs/{id}/logs`` and the console read), so it outlives the workers. The rollout id
is that of the call being served (``request_metadata``; group rewards show the sample id),
set by the worker app for the duration of each call. Lines are written whole with one
``write`` on an ``O_APPEND`` descriptor, so workers and the trainer never split each other's
lines.

Example:
    >>> import io
    >>> out = io.StringIO()
    >>> stream = TaggedStream(out, "INFO", LineSink("reward-1", None))
    >>> with call_tag("ro-7.a0"):
    ...     _ = stream.write("marker\\n")
    >>> out.getvalue().split(" ", 2)[2]
    'INFO    [fn reward-1 ro-7.a0] marker\\n'
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional, TextIO

#: The rollout (or sample) id of the call the current code serves.
_CALL_TAG: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "rltune_call_tag", default=None)
#: The job process sets this; the local backend passes it to each worker as ``--job-log``.
JOB_LOG_ENV = "RLTUNE_JOB_LOG"


@contextlib.contextmanager
def call_tag(tag: Optional[str]) -> Iterator[None]:
    """Tag output written inside the block (and in tasks/threads started from it)."""
    token = _CALL_TAG.set(tag)
    try:
        yield
    finally:
        _CALL_TAG.reset(token)


def tag_of(data: Any) -> Optional[str]:
    """The tag of one input: its rollout id, or ``sample <id>`` for a group reward."""
    meta = getattr(data, "request_metadata", None)
    if meta is None:
        return None
    if getattr(data, "agent_outputs", None) is not None:  # a group: many rollouts, one sample
        return f"sample {meta.sample_id}"
    return meta.rollout_id


class LineSink:
    """Formats tagged lines and appends them to the job log (when there is one)."""

    def __init__(self, function: str, job_log: Optional[str]):
        self.function = function
        self._fd: Optional[int] = None
        if job_log:
            self._fd = os.open(job_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def line(self, level: str, text: str) -> str:
        tag = _CALL_TAG.get()
        label = f"fn {self.function}" + (f" {tag}" if tag else "")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        return f"{stamp} {level:<7} [{label}] {text}\n"

    def emit(self, level: str, text: str, stream: Optional[TextIO]) -> None:
        out = self.line(level, text)
        if self._fd is not None:
            try:
                os.write(self._fd, out.encode("utf-8", "replace"))
            except OSError:
                pass  # a full disk must not break the user's function
        if stream is not None:
            try:
                stream.write(out)
                stream.flush()
            except (OSError, ValueError):
                pass


class TaggedStream(io.TextIOBase):
    """A text stream that emits each complete line through a ``LineSink`` (per-thread buffer)."""

    def __init__(self, original: Optional[TextIO], level: str, sink: LineSink):
        self.original, self.level, self.sink = original, level, sink
        self._local = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        buf = getattr(self._local, "buf", "") + str(text)
        *lines, rest = buf.split("\n")
        self._local.buf = rest
        for line in lines:
            self.sink.emit(self.level, line, self.original)
        return len(text)

    def flush(self) -> None:
        rest = getattr(self._local, "buf", "")
        if rest:
            self._local.buf = ""
            self.sink.emit(self.level, rest, self.original)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # subprocesses inherit the real descriptor
        if self.original is None:
            raise OSError("no underlying stream")
        return self.original.fileno()


class TaggedLogHandler(logging.Handler):
    """Log records as tagged lines at their own level."""

    def __init__(self, sink: LineSink, stream: Optional[TextIO]):
        super().__init__()
        self.sink, self.stream = sink, stream
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            for text in self.format(record).splitlines() or [""]:
                self.sink.emit(record.levelname, text, self.stream)
        except Exception:
            self.handleError(record)


def install(function: str, job_log: Optional[str] = None) -> LineSink:
    """Capture this worker's stdout, stderr and root-logger output (call once, at start)."""
    sink = LineSink(function, job_log)
    out, err = sys.__stdout__, sys.__stderr__
    sys.stdout = TaggedStream(out, "INFO", sink)  # type: ignore[assignment]
    sys.stderr = TaggedStream(err, "WARNING", sink)  # type: ignore[assignment]
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler):
            root.removeHandler(handler)
    handler = TaggedLogHandler(sink, err)
    handler.setLevel(logging.NOTSET)
    root.addHandler(handler)
    return sink


def job_log() -> Optional[Path]:
    """The job log workers append to (``$RLTUNE_JOB_LOG``), created if missing; None outside
    a job. A sandboxed worker sees this one file of the job's folder."""
    value = os.environ.get(JOB_LOG_ENV)
    if not value:
        return None
    path = Path(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(exist_ok=True)
    return path


def worker_args(name: str, job_log_path: Optional[str] = None) -> list[str]:
    """Flags for a worker command line: its function name and, in a job, the job log (or
    ``job_log_path``, the path the worker sees for it)."""
    args = ["--name", name]
    if job_log_path or os.environ.get(JOB_LOG_ENV):
        args += ["--job-log", job_log_path or os.environ[JOB_LOG_ENV]]
    return args


class JobLogPipe:
    """A sandboxed worker's way into the job log: a pipe, so it can append lines but never
    truncate or rewrite the file. A thread of this process copies what arrives to the log,
    whole lines per ``write`` on an ``O_APPEND`` descriptor, until the worker closes its end.

    The worker opens ``inside`` (``/proc/self/fd/<n>``: the inherited write end)."""

    def __init__(self, path: Path):
        self.path = path
        self._read, self._write = os.pipe()
        os.set_inheritable(self._write, True)
        self.pass_fds: tuple[int, ...] = (self._write,)
        self.inside = f"/proc/self/fd/{self._write}"

    @classmethod
    def open(cls, path: Optional[Path]) -> Optional[JobLogPipe]:
        return cls(path) if path is not None else None

    def started(self) -> None:
        """The worker holds the write end now: close ours and start copying."""
        os.close(self._write)
        self.pass_fds = ()
        threading.Thread(target=self._copy, name="job-log-pipe", daemon=True).start()

    def _copy(self) -> None:
        out = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        pending = b""
        try:
            while chunk := os.read(self._read, 1 << 16):
                pending += chunk
                cut = pending.rfind(b"\n") + 1
                if cut:
                    os.write(out, pending[:cut])
                    pending = pending[cut:]
            if pending:
                os.write(out, pending + b"\n")
        except OSError:
            pass  # a full disk must not stop the worker; it keeps its own log
        finally:
            os.close(out)
            os.close(self._read)
