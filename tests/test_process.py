"""The process helper: pid_alive, die-with-parent, process groups stopped with a grace period."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from rltune._process import (
    descendants,
    describe_exit,
    die_with_parent,
    pid_alive,
    signal_group,
    spawn_group,
    stop_group,
    tail_file,
)

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


def _wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pid_alive(pid)


def test_live_gone_and_zombie_processes():
    assert pid_alive(os.getpid()) and not pid_alive(None) and not pid_alive(0)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert _wait_gone(child.pid)  # exited but not reaped yet: a zombie does not count as alive
    child.wait()
    assert not pid_alive(child.pid)


@linux_only
def test_a_child_started_with_die_with_parent_dies_with_its_parent():
    # The middle process starts a sleeper with die_with_parent and is then killed.
    middle = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "from rltune._process import die_with_parent\n"
         "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
         " preexec_fn=die_with_parent())\n"
         "print(p.pid, flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    sleeper = int(middle.stdout.readline())
    assert pid_alive(sleeper)
    middle.kill()
    middle.wait()
    assert _wait_gone(sleeper, 10)
    assert die_with_parent() is not None


@linux_only
def test_spawn_group_then_stop_group_escalates_to_sigkill_and_takes_the_whole_group(tmp_path):
    script = ("import signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"  # only SIGKILL stops it
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print('grandchild', p.pid, flush=True)\n"
              "time.sleep(60)\n")

    async def main():
        proc = await spawn_group([sys.executable, "-c", script], log_path=tmp_path / "log",
                                 cwd=tmp_path)
        assert os.getpgid(proc.pid) == proc.pid  # a group of its own
        deadline = time.monotonic() + 30
        while "grandchild" not in tail_file(tmp_path / "log") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        grandchild = int(tail_file(tmp_path / "log").split()[-1])
        t0 = time.monotonic()
        assert await stop_group(proc, grace=0.5)
        took = time.monotonic() - t0
        return proc.returncode, grandchild, took

    code, grandchild, took = asyncio.run(main())
    assert code == -signal.SIGKILL and describe_exit(code) == "killed by signal SIGKILL"
    assert 0.4 < took < 10
    assert _wait_gone(grandchild, 10)
    signal_group(grandchild, signal.SIGKILL)  # a group that is gone: no error


def test_stop_group_of_a_process_that_heeds_sigterm_is_quick(tmp_path):
    async def main():
        proc = await spawn_group([sys.executable, "-c", "import time; time.sleep(60)"],
                                 log_path=tmp_path / "log", cwd=tmp_path)
        t0 = time.monotonic()
        assert await stop_group(proc, grace=20)
        return proc.returncode, time.monotonic() - t0

    code, took = asyncio.run(main())
    assert code == -signal.SIGTERM and took < 10


def test_describe_exit_and_tail_file(tmp_path):
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(-999) == "killed by signal 999"
    (tmp_path / "x.log").write_bytes(b"abc\xffdef")
    assert tail_file(tmp_path / "x.log", 3) == "def"
    assert tail_file(tmp_path / "missing.log") == ""


def test_descendants_are_the_tree_psutil_finds_without_walking_every_process(monkeypatch):
    """Children and grandchildren, read from the tree's own /proc files (on Linux), the same
    processes psutil's walk of the whole machine finds."""
    import psutil

    proc = subprocess.Popen(["bash", "-c", "sleep 30 & (sleep 30 & sleep 30); wait"])
    ps, kids = psutil.Process(proc.pid), []
    try:
        deadline = time.monotonic() + 10
        while len(kids) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
            kids = ps.children(recursive=True)
        assert len(kids) == 4  # two sleeps, the subshell and its sleep
        if sys.platform.startswith("linux"):  # no walk of every process's status
            monkeypatch.setattr(psutil.Process, "children", None)
        assert sorted(p.pid for p in descendants(ps)) == sorted(p.pid for p in kids)
    finally:
        for child in kids:
            child.kill()
        proc.kill()
        proc.wait()
