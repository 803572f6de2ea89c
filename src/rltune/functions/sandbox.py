"""What a function worker may see: a minimal environment and, on Linux, a bubblewrap sandbox.

User functions are other people's code. A worker gets only:

- an environment built from scratch: ``PATH``, the locale, the thread limits, a private
  ``HOME``/``TMPDIR``, ``PYTHONPATH`` (its workspace and rltune) and its own ``runtime.env`` —
  never ``RLTUNE_HOME``, API keys or anything else of the process that starts it;
- with bubblewrap (``bwrap``, Debian package ``bubblewrap``): a mount namespace holding the
  system's programs and libraries read-only, the Python installation read-only, its code
  read-only at ``/workspace``, a built venv at ``/venv``, a private folder at ``/worker`` and
  a private ``/tmp`` of a given size. ``$RLTUNE_HOME`` (keys, database, other workspaces' files
  and jobs) is not mounted at all, and a new PID namespace hides every other process (so
  ``/proc/<server pid>/environ`` does not exist). No capabilities, ``nobody`` in a user
  namespace where the kernel allows one, and a seccomp filter against escape syscalls
  (``rltune.functions.seccomp``): a server running as root hands no privilege to function
  code. The network is shared: a rollout must reach the policy gateway on 127.0.0.1.

``RLTUNE_FUNCTION_ISOLATION`` picks the mode: ``auto`` (default: bubblewrap when it works, else
environment only), ``bwrap`` (bubblewrap or fail) or ``none`` (environment only).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from rltune.functions import seccomp
from rltune.safefs import TENANT_WRITABLE
from rltune.sdk.errors import ConfigError

log = logging.getLogger("rltune.functions.sandbox")

MODES = ("auto", "bwrap", "none")
#: Variables copied from the parent when set (none of them can carry a secret).
_PASS_VARS = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "RLTUNE_LOG_LEVEL", "LOG_LEVEL",
              "RLTUNE_WORKER_HTTP", "RLTUNE_WORKER_LOOP", "RLTUNE_WORKER_SHARE_SSL",
              "ENABLE_TRAJECTORY", "RLTUNE_TRACE_DIR")
#: Tracing settings (OTEL_*) reach workers, except collector credentials (``*_HEADERS``).
_PASS_PREFIX, _SECRET_SUFFIX = "OTEL_", "_HEADERS"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc a Python process needs (users, DNS, TLS roots, time zone, the linker cache).
_ETC = ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
        "localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl",
        "ca-certificates", "ca-certificates.conf", "alternatives", "mime.types", "os-release",
        "pki", "crypto-policies")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def isolation_chosen() -> bool:
    """``RLTUNE_FUNCTION_ISOLATION`` is set: a local ``rltune train`` then isolates as it says
    instead of running functions as the user."""
    return bool(os.environ.get("RLTUNE_FUNCTION_ISOLATION", "").strip())


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


def minimal_env(workspace: Path, private_dir: Path, extra: dict[str, str],
                tmpdir: Optional[str] = None) -> dict[str, str]:
    """The whole environment of a worker: nothing inherited but the harmless variables.

    ``workspace`` and ``private_dir`` are the paths the worker sees (``/workspace`` and
    ``/worker`` in the sandbox); ``tmpdir`` is ``TMPDIR`` (default: ``private_dir``)."""
    import rltune

    env = passed_env()
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bindir}:{DEFAULT_PATH}"
    env["HOME"] = str(private_dir)
    env["TMPDIR"] = tmpdir or str(private_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    rltune_root = str(Path(rltune.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join((str(workspace), rltune_root))
    env.update(extra)
    return env


def user_env(workspace: Path, extra: dict[str, str]) -> dict[str, str]:
    """A worker's environment when it runs as the user (a local ``rltune train``): this
    process's whole environment (``HOME``, the HF cache, API keys), the workspace and rltune
    first on ``PYTHONPATH``, then ``extra``."""
    import rltune

    env = dict(os.environ)
    rltune_root = str(Path(rltune.__file__).resolve().parent.parent)
    paths = [str(workspace), rltune_root, *filter(None, env.get("PYTHONPATH", "").split(
        os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def python_dirs(python: str) -> list[str]:
    """Directories the worker's interpreter imports from (read-only in the sandbox)."""
    import rltune

    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix,
            str(Path(rltune.__file__).resolve().parent.parent)}
    dirs.update(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p
                                              or p.startswith(sys.base_prefix)))
    py = Path(python)
    dirs.add(str(py.parent.parent))  # a per-function venv: <venv>/bin/python
    dirs.add(str(py.resolve().parent.parent))
    return sorted(d for d in dirs if d not in ("/", "") and _exists(d))


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except OSError:  # a folder this user may not enter (a server that is not root)
        return False


def homes_to_hide(workspace: Path) -> list[Path]:
    """``$RLTUNE_HOME`` and any rltune home the workspace lies in (a registered function's)."""
    from rltune.paths import rltune_home

    homes = {rltune_home().resolve()}
    homes.update(p for p in workspace.parents
                 if _exists(str(p / "server")) and _exists(str(p / "functions")))
    return sorted(homes)


#: Where a sandboxed process sees its folders (neutral names: no server path shows through
#: its working directory, environment or ``/proc/self/mountinfo``).
WORKSPACE, VENV, WORKER_DIR, TRACES = "/workspace", "/venv", "/worker", "/traces"
#: The unprivileged user (``nobody``) a function runs as inside its user namespace.
SANDBOX_UID = 65534


@functools.cache
def bwrap_supports(option: str) -> bool:
    """Whether this bubblewrap knows ``option`` (``--size`` and ``--disable-userns`` came
    in 0.8.0)."""
    try:
        res = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in (res.stdout + res.stderr).split()


@functools.lru_cache(maxsize=1)
def userns_problem() -> Optional[str]:
    """None when bubblewrap can run a process as ``nobody`` in a new user namespace here."""
    if bwrap_problem() is not None:
        return bwrap_problem()
    if not bwrap_supports("--disable-userns"):
        log.warning("bubblewrap is older than 0.8.0 (no --disable-userns): functions run with "
                    "all capabilities dropped and a seccomp filter, as the server's uid")
        return "bubblewrap older than 0.8.0"
    res = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-user", "--uid",
                          str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--disable-userns",
                          "--cap-drop", "ALL", "true"], capture_output=True, timeout=20)
    if res.returncode != 0:
        problem = res.stderr.decode(errors="replace")[:300].strip()
        log.warning("bubblewrap cannot create a user namespace here (%s): functions run "
                    "with all capabilities dropped and a seccomp filter, but as the server's "
                    "uid (kernel.unprivileged_userns_clone / user.max_user_namespaces)", problem)
        return problem
    return None


def hardening_args() -> list[str]:
    """No capabilities; ``nobody`` in a user namespace that cannot create another one."""
    args = ["--cap-drop", "ALL"]
    if userns_problem() is None:
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
                 "--disable-userns"]
    return args


@dataclass
class BwrapCommand:
    """A sandboxed command line and the descriptors it needs (its seccomp program).

    Start it with ``Popen(c.argv, pass_fds=c.pass_fds)``, then ``c.close()``."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()


def bwrap_command(cmd: list[str], workspace: Path, private_dir: Path, *,
                  workspace_writable: bool = False, venv: Optional[Path] = None,
                  venv_writable: bool = False, tmp_bytes: Optional[int] = None,
                  private_bytes: Optional[int] = None, writable: dict[Path, str] | None = None,
                  readonly: dict[Path, str] | None = None) -> BwrapCommand:
    """``cmd`` wrapped in a bubblewrap sandbox (see the module doc).

    ``workspace`` shows at ``/workspace`` (read-only unless ``workspace_writable``: the code
    of a registered function is shared by every instance of it), ``venv`` at ``/venv``,
    ``private_dir`` (the worker's ``HOME``) at ``/worker``, each of ``writable`` at the path it
    maps to (each must be one of ``rltune.safefs.TENANT_WRITABLE``: trusted code touches the
    files of a writable folder only through ``rltune.safefs``), each of ``readonly`` read-only.
    ``/tmp`` is a tmpfs of ``tmp_bytes``; with ``private_bytes``, ``/worker`` is a tmpfs of that
    size instead of ``private_dir`` (the kernel caps what the function writes there). ``cmd``
    must name these inside paths.
    ``$RLTUNE_HOME`` is not mounted; where a mounted Python folder contains it, an empty
    tmpfs hides it.
    """
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", *hardening_args(), "--proc", "/proc", "--dev", "/dev"]
    if tmp_bytes and bwrap_supports("--size"):
        args += ["--size", str(int(tmp_bytes))]
    elif tmp_bytes:
        log.warning("bubblewrap is older than 0.8.0 (no --size): /tmp is not size-limited")
    args += ["--tmpfs", "/tmp"]
    bound: list[str] = []
    for d in _SYSTEM_DIRS:
        p = Path(d)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            args += ["--ro-bind", d, d]
            bound.append(d)
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    pydirs = python_dirs(sys.executable)
    for d in pydirs:
        args += ["--ro-bind", d, d]
    hidden = [h for h in homes_to_hide(workspace)
              if any(_inside(h, Path(d)) for d in bound + pydirs)]
    for h in hidden:
        args += ["--tmpfs", str(h)]
    # Mounted again after, so they show through a hidden parent.
    for d in pydirs:
        if any(_inside(Path(d), h) for h in hidden):
            args += ["--ro-bind", d, d]
    unlisted = sorted(set((writable or {}).values()) - set(TENANT_WRITABLE))
    if unlisted:  # trusted code touches each listed folder through rltune.safefs only
        raise ValueError(f"{', '.join(unlisted)} is not a tenant-writable folder of "
                         "rltune.safefs.TENANT_WRITABLE; list it there with the code that "
                         "reads it")
    args += ["--bind" if workspace_writable else "--ro-bind", str(workspace), WORKSPACE]
    if venv is not None:
        args += ["--bind" if venv_writable else "--ro-bind", str(venv), VENV]
    if private_bytes and bwrap_supports("--size"):
        args += ["--size", str(int(private_bytes)), "--tmpfs", WORKER_DIR]
    else:
        if private_bytes:
            log.warning("bubblewrap is older than 0.8.0 (no --size): /worker is not capped")
        args += ["--bind", str(private_dir), WORKER_DIR]
    for path, inside in (writable or {}).items():
        args += ["--bind", str(path), inside]
    for path, inside in (readonly or {}).items():
        args += ["--ro-bind", str(path), inside]
    fds: tuple[int, ...] = ()
    if seccomp.supported():
        fd = seccomp.program_fd()
        args += ["--seccomp", str(fd)]
        fds = (fd,)
    else:
        log.warning("no seccomp filter for %s: sandboxed functions run without one",
                    seccomp.machine())
    args += ["--chdir", WORKSPACE, "--"]
    return BwrapCommand(args + cmd, fds)


def _inside(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False
