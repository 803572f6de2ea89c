"""The local process backend's RSS reading: children are found by a periodic walk."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

from rltune.functions.backends import local
from rltune.functions.backends.local import LocalProcessHandle

# A parent that starts a child holding ~64 MB, then waits.
PARENT = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
          "'import time; x = bytearray(64 << 20); time.sleep(60)']); time.sleep(60)")


def test_rss_includes_children_and_walks_for_them_only_every_refresh_interval(
        tmp_path, monkeypatch):
    walks = []
    descendants = local.descendants

    def counting(ps):
        walks.append(ps.pid)
        return descendants(ps)

    monkeypatch.setattr(local, "descendants", counting)
    proc = subprocess.Popen([sys.executable, "-c", PARENT])
    handle = LocalProcessHandle("w0", proc, port=1, log_path=tmp_path / "log")
    try:
        monkeypatch.setattr(local, "CHILDREN_REFRESH_S", 0.0)  # walk on every reading
        deadline = time.monotonic() + 30
        while handle.rss_bytes() < 64 << 20:  # the child's memory counts once it is found
            assert time.monotonic() < deadline, "the child's RSS was never counted"
            time.sleep(0.05)
        monkeypatch.setattr(local, "CHILDREN_REFRESH_S", 3600.0)
        before = len(walks)
        readings = [handle.rss_bytes() for _ in range(20)]
        assert before > 0 and len(walks) == before  # no walk of /proc within the interval
        assert min(readings) >= 64 << 20  # the child found by the last walk still counts
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()


async def test_a_worker_start_cancelled_by_the_pools_shutdown_kills_the_worker(tmp_path):
    import asyncio

    import pytest

    from rltune.functions.backends.local import LocalProcessBackend
    from rltune.functions.spec import FunctionComponentSpec

    # Only this test's worker counts: under xdist the same process may hold other files'
    # children (and their zombies), which are not this backend's to reap.
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    ours: set[int] = set()

    def workers() -> list[psutil.Process]:
        out = []
        for p in psutil.Process().children(recursive=True):
            if p.pid in before:
                continue
            try:
                if p.pid in ours or "rltune.functions.worker" in " ".join(p.cmdline()):
                    ours.add(p.pid)
                    out.append(p)
            except psutil.Error:  # gone, or a zombie not reaped
                if p.pid in ours:
                    out.append(p)
        return out

    backend = LocalProcessBackend(tmp_path / "logs")
    ws = Path(__file__).parent / "fixtures" / "ws"
    spec = FunctionComponentSpec(classpath="functions.trivial.Trivial", func_type="reward",
                                 workspace=ws)
    start = asyncio.ensure_future(backend.start_worker(spec, "w0"))
    while not workers():
        await asyncio.sleep(0.01)
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    await backend.close()
    deadline = time.monotonic() + 10
    while workers() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert workers() == []  # killed and reaped
