"""What a function worker may see: a minimal environment and, on Linux, a bubblewrap sandbox.

User functions are other people's code. A worker gets only:

- an environment built from scratch: ``PATH``, the locale, the thread limits, a private
  ``HOME``/``TMPDIR``, ``PYTHONPATH`` (its workspace and rltune) and its own ``runtime.env`` —
  never ``RLTUNE_HOME``, API keys or anything else of the process that starts it;
- with bubblewrap (``bwrap``, Debian package ``bubblewrap``): a mount namespace holding the
  system's programs and libraries read-only, the Python installation read-only, its workspace,
  and an empty private ``/tmp``. ``$RLTUNE_HOME`` (keys, database, other workspaces' files and
  jobs) is not mounted at all, and a new PID namespace hides every other process (so
  ``/proc/<server pid>/environ`` does not exist). The network is shared: a rollout must reach
  the policy gateway on 127.0.0.1.

``RLTUNE_FUNCTION_ISOLATION`` picks the mode: ``auto`` (default: bubblewrap when it works, else
environment only), ``bwrap`` (bubblewrap or fail) or ``none`` (environment only).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from rltune.sdk.errors import ConfigError

log = logging.getLogger("rltune.functions.sandbox")

MODES = ("auto", "bwrap", "none")
#: Variables copied from the parent when set (none of them can carry a secret).
_PASS_VARS = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "RLTUNE_LOG_LEVEL", "LOG_LEVEL",
              "RLTUNE_WORKER_HTTP", "RLTUNE_WORKER_LOOP", "ENABLE_TRAJECTORY", "RLTUNE_TRACE_DIR")
#: Tracing settings (OTEL_*) reach workers, except collector credentials (``*_HEADERS``).
_PASS_PREFIX, _SECRET_SUFFIX = "OTEL_", "_HEADERS"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc a Python process needs (users, DNS, TLS roots, time zone, the linker cache).
_ETC = ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
        "localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl",
        "ca-certificates", "ca-certificates.conf", "alternatives", "mime.types", "os-release",
        "pki", "crypto-policies")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def isolation_mode() -> str:
    """The configured mode (``RLTUNE_FUNCTION_ISOLATION``), checked."""
    mode = os.environ.get("RLTUNE_FUNCTION_ISOLATION", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ConfigError(f"RLTUNE_FUNCTION_ISOLATION={mode!r} is not a mode",
                          where="RLTUNE_FUNCTION_ISOLATION",
                          hint=f"use one of {', '.join(MODES)}")
    return mode


@functools.lru_cache(maxsize=1)
def bwrap_problem() -> Optional[str]:
    """None when bubblewrap can start a sandbox here, else why not."""
    exe = shutil.which("bwrap")
    if exe is None or sys.platform != "linux":
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    try:
        res = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc",
                              "--dev", "/dev", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if res.returncode != 0:
        return f"bwrap cannot create namespaces here: {res.stderr.decode(errors='replace')[:300]}"
    return None


def active_isolation() -> str:
    """``"bwrap"`` or ``"none"``: what workers started now get."""
    mode = isolation_mode()
    if mode == "none":
        return "none"
    problem = bwrap_problem()
    if problem is None:
        return "bwrap"
    if mode == "bwrap":
        raise ConfigError(f"function isolation was required but {problem}",
                          where="RLTUNE_FUNCTION_ISOLATION",
                          hint="install bubblewrap or set RLTUNE_FUNCTION_ISOLATION=auto")
    return "none"


def passed_env() -> dict[str, str]:
    """This process's variables a worker inherits: the harmless ``_PASS_VARS`` and the
    tracing settings (``OTEL_*`` without collector credentials)."""
    env = {k: os.environ[k] for k in _PASS_VARS if k in os.environ}
    env.update({k: v for k, v in os.environ.items()
                if k.startswith(_PASS_PREFIX) and not k.endswith(_SECRET_SUFFIX)})
    return env


def minimal_env(workspace: Path, private_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of a worker: nothing inherited but the harmless variables."""
    import rltune

    env = passed_env()
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bindir}:{DEFAULT_PATH}"
    env["HOME"] = env["TMPDIR"] = str(private_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    rltune_root = str(Path(rltune.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join((str(workspace), rltune_root))
    env.update(extra)
    return env


def _python_dirs(python: str) -> list[str]:
    """Directories the worker's interpreter imports from (read-only in the sandbox)."""
    import rltune

    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix,
            str(Path(rltune.__file__).resolve().parent.parent)}
    dirs.update(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p
                                              or p.startswith(sys.base_prefix)))
    py = Path(python)
    dirs.add(str(py.parent.parent))  # a per-function venv: <venv>/bin/python
    dirs.add(str(py.resolve().parent.parent))
    return sorted(d for d in dirs if Path(d).exists() and d not in ("/", ""))


def homes_to_hide(workspace: Path) -> list[Path]:
    """``$RLTUNE_HOME`` and any rltune home the workspace lies in (a registered function's)."""
    from rltune.paths import rltune_home

    homes = {rltune_home().resolve()}
    homes.update(p for p in workspace.parents
                 if (p / "server").is_dir() and (p / "functions").is_dir())
    return sorted(homes)


def bwrap_command(cmd: list[str], workspace: Path, private_dir: Path,
                  hidden: list[Path], writable: tuple[Path, ...] = ()) -> list[str]:
    """``cmd`` wrapped in a bubblewrap sandbox (see the module doc).

    ``hidden`` paths (``$RLTUNE_HOME``) get an empty tmpfs over them even if a Python
    directory lies inside; ``workspace``, ``private_dir`` and the existing ``writable`` paths
    (the job's log and trace folder, which the worker appends to) are mounted after.
    """
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for d in _SYSTEM_DIRS:
        p = Path(d)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            args += ["--ro-bind", d, d]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for d in _python_dirs(cmd[0]):
        args += ["--ro-bind", d, d]
    for h in hidden:
        args += ["--tmpfs", str(h)]
    # Mounted last, so they show through a hidden parent (a workspace inside $RLTUNE_HOME).
    for d in _python_dirs(cmd[0]):
        if any(_inside(Path(d), h) for h in hidden):
            args += ["--ro-bind", d, d]
    args += ["--bind", str(workspace), str(workspace)]
    args += ["--bind", str(private_dir), str(private_dir)]
    for path in writable:
        args += ["--bind", str(path), str(path)]
    args += ["--chdir", str(workspace), "--"]
    return args + cmd


def _inside(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False
