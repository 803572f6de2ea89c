"""pid_alive: live, gone and zombie processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rltune._process import pid_alive


def test_live_gone_and_zombie_processes():
    assert pid_alive(os.getpid()) and not pid_alive(None) and not pid_alive(0)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while pid_alive(child.pid) and time.monotonic() < deadline:  # exited but not reaped yet
        time.sleep(0.05)
    assert not pid_alive(child.pid)  # a zombie does not count as alive
    child.wait()
    assert not pid_alive(child.pid)
