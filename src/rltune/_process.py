"""Whether a process id still names a live process (used to spot owners that died).

Example:
    >>> import os
    >>> pid_alive(os.getpid()), pid_alive(None)
    (True, False)
"""

from __future__ import annotations

import os
from typing import Optional


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
