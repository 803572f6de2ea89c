"""Child processes: die with the parent, run in a group of their own, stop with a grace period.

Every process rltune starts goes through here:

- :func:`die_with_parent` is the ``preexec_fn`` that makes a child get a signal when the
  process (on Linux: the *thread*) that forked it exits (``PR_SET_PDEATHSIG``); None elsewhere;
- :func:`spawn_group` starts a command in a new process group (session) that dies with this
  process, its output appended to a log file;
- :func:`signal_group` / :func:`stop_group` signal or stop such a group: SIGTERM, then SIGKILL
  after ``grace`` seconds, and a last SIGKILL for stragglers;
- :func:`pid_alive`, :func:`describe_exit`, :func:`descendants`, :func:`tree_rss` and
  :func:`tail_file` say how a process is doing.

Example:
    >>> import os
    >>> pid_alive(os.getpid()), pid_alive(None)
    (True, False)
    >>> describe_exit(-9), describe_exit(3), describe_exit(None)
    ('killed by signal SIGKILL', 'exited with code 3', 'still running')
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

PR_SET_PDEATHSIG = 1


def pid_alive(pid: Optional[int]) -> bool:
    """True for a running process; False for none, a gone one, or a zombie (exited, unreaped)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is just not ours
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:  # no /proc (macOS): signal 0 is all we can know
        return True


def die_with_parent(sig: int = signal.SIGKILL) -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` giving the child ``sig`` when its parent thread exits (Linux), or None.

    Start the child from a thread that lives as long as the parent means it to (the event
    loop's thread): the signal fires when the *forking thread* exits."""
    if sys.platform != "linux":
        return None

    def _set() -> None:  # in the child, between fork and exec
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
        except Exception:
            pass

    return _set


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is gone (or not ours) is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def spawn_group(cmd: Sequence[str], *, log_path: Path, cwd: Path,
                      death_signal: int = signal.SIGTERM) -> asyncio.subprocess.Process:
    """Start ``cmd`` in a new process group that gets ``death_signal`` when this process
    dies; stdin is empty, stdout and stderr are appended to ``log_path``."""
    with open(log_path, "ab") as out:
        return await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, cwd=str(cwd),
            start_new_session=True, preexec_fn=die_with_parent(death_signal))


async def stop_group(proc: asyncio.subprocess.Process, grace: float,
                     kill_wait: float = 5.0) -> bool:
    """SIGTERM ``proc``'s group, SIGKILL it after ``grace`` s (then wait up to ``kill_wait``),
    and SIGKILL what is left of the group; True once ``proc`` has exited."""
    signal_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
    except asyncio.TimeoutError:
        signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), kill_wait)
    signal_group(proc.pid, signal.SIGKILL)  # stragglers of the group
    return proc.returncode is not None


def describe_exit(code: Optional[int]) -> str:
    """A process's return code in words: ``killed by signal SIGKILL``, ``exited with code 1``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def descendants(proc: Any) -> list[Any]:
    """The ``psutil.Process`` ``proc``'s descendants (children, theirs, ...), like
    ``proc.children(recursive=True)`` but, on Linux, read from ``/proc/<pid>/task/*/children``
    of the tree's own processes: psutil finds children by reading the status of every process
    on the machine, which on a busy host took a tenth of the trainer's event loop (its pools ask
    for their workers' memory several times a second). Elsewhere, or when the kernel has no
    such files, psutil's walk.

    >>> import psutil
    >>> descendants(psutil.Process()) == psutil.Process().children(recursive=True)
    True
    """
    import psutil

    if not os.path.exists(f"/proc/{proc.pid}/task/{proc.pid}/children"):
        return proc.children(recursive=True)
    found: list[Any] = []
    todo, seen = [proc.pid], {proc.pid}
    while todo:
        pid = todo.pop()
        for pid_child in _children_pids(pid):
            if pid_child in seen:
                continue
            seen.add(pid_child)
            todo.append(pid_child)
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid_child))
    return found


def _children_pids(pid: int) -> list[int]:
    """The children of each of ``pid``'s threads (a child's parent is the thread that forked
    it); [] once ``pid`` is gone."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def tree_rss(proc: Any, children: Sequence[Any] = ()) -> int:
    """Resident bytes of the ``psutil.Process`` ``proc`` and of ``children`` (those that are
    gone count 0); 0 when ``proc`` itself is gone."""
    import psutil

    try:
        total = proc.memory_info().rss
    except psutil.Error:
        return 0
    for child in children:
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total


def tail_file(path: Path, n_chars: int = 2000) -> str:
    """The last ``n_chars`` bytes of a (log) file as text; "" when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n_chars))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
