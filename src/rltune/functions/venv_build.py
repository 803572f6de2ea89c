"""Building a function's virtual environment: tenant code, so it runs like a worker does.

``pip install -r requirements.txt`` runs a workspace's own ``setup.py`` or build backend. The
build therefore gets the worker's treatment (``rltune.functions.sandbox``): a minimal
environment and, with bubblewrap, the sandbox — a private copy of the workspace at
``/workspace`` and the new venv at ``/venv`` are writable, ``$RLTUNE_HOME`` is not mounted, no
capabilities, the seccomp filter. It is stopped after ``RLTUNE_VENV_BUILD_TIMEOUT`` seconds
(default 900) or when the venv and its build folder pass ``RLTUNE_VENV_MAX_MB`` (default 4096).

Packages come from the installer's default index unless the operator names an index,
find-links and a CA bundle for builds (``rltune.functions.build_sources``); the server's own pip
configuration never reaches a build.

The full output goes to ``<venvs>/venv-<digest>.build.log`` on the server's side; the error a
tenant sees holds only the installer's own error lines, with server paths and key-shaped
strings redacted.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from rltune.functions import sandbox
from rltune.functions.build_sources import build_sources
from rltune.sdk.errors import ConfigError

log = logging.getLogger("rltune.functions.venv_build")

TIMEOUT_ENV, MAX_MB_ENV = "RLTUNE_VENV_BUILD_TIMEOUT", "RLTUNE_VENV_MAX_MB"
DEFAULT_TIMEOUT_S, DEFAULT_MAX_MB = 900.0, 4096
_CHECK_EVERY_S = 0.5
_SECRET = re.compile(r"rlt-[A-Za-z0-9_\-]{16,}")
#: The installer's own error lines (pip: ``ERROR:``/``error:``; uv: ``error:``, ``Caused by:``).
_OWN_LINE = re.compile(r"^\s*(ERROR:|error:|Caused by:|hint:)")

# Runs inside the sandbox with only the standard library: create the venv, let it see this
# environment's packages (a .pth calling site.addsitedir, so editable installs work too),
# install the requirements. argv: venv, requirements file, uv binary or "".
_DRIVER = r"""
import os, subprocess, sys
venv, req, uv, parent_sites = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
python = os.path.join(venv, "bin", "python")
if uv:
    steps = [[uv, "venv", "-q", "--system-site-packages", "--python", sys.executable, venv]]
else:
    steps = [[sys.executable, "-m", "venv", "--system-site-packages", venv]]
subprocess.run(steps[0], check=True)
site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                      capture_output=True, text=True, check=True).stdout.strip()
with open(os.path.join(site, "zz-rltune-parent.pth"), "w") as fh:
    fh.write("".join(f"import site; site.addsitedir({d!r})\n" for d in parent_sites))
cmd = ([uv, "pip", "install", "-q", "--python", python, "-r", req] if uv else
       [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", req])
sys.exit(subprocess.run(cmd).returncode)
"""


def limits() -> tuple[float, int]:
    """(timeout in seconds, size cap in bytes), from the environment, checked."""
    out = []
    for name, default in ((TIMEOUT_ENV, DEFAULT_TIMEOUT_S), (MAX_MB_ENV, DEFAULT_MAX_MB)):
        raw = os.environ.get(name, "").strip()
        try:
            value = float(raw) if raw else float(default)
        except ValueError:
            value = -1.0
        if value <= 0:
            raise ConfigError(f"{name}={raw!r} is not a positive number", where=name,
                              hint=f"unset it for the default ({default})")
        out.append(value)
    return out[0], int(out[1] * 2**20)


def _size(*roots: Path) -> int:
    total = 0
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
                except OSError:
                    pass
    return total


def redact(text: str, paths: list[str]) -> str:
    for p in sorted((p for p in paths if p and p != "/"), key=len, reverse=True):
        text = text.replace(p, "<server>")
    return _SECRET.sub("rlt-***", text)


def build(workspace: Path, venv: Path, uv: Optional[str], digest: str) -> None:
    """Build ``venv`` for ``workspace/requirements.txt`` (see the module doc); raise
    ``ConfigError`` with a tenant-safe message when the build fails or passes a limit."""
    from rltune.paths import rltune_home

    timeout, max_bytes = limits()
    isolated = sandbox.active_isolation() == "bwrap"
    sources, source_mounts = build_sources(sandboxed=isolated)  # the operator's index settings
    scratch = Path(tempfile.mkdtemp(prefix=f".build-{digest}-", dir=venv.parent))
    log_path = venv.parent / f"venv-{digest}.build.log"
    home = scratch / "home"
    home.mkdir()
    venv.mkdir(parents=True)
    try:
        if isolated and uv and not _visible_in_sandbox(uv):
            log.info("uv at %s is outside the sandbox's mounts; building with pip", uv)
            uv = None
        if isolated:
            src = scratch / "src"  # a private copy: the build may write build/, *.egg-info
            skip = {venv.parent.resolve()}  # a cache folder inside the workspace
            shutil.copytree(workspace, src, symlinks=True, ignore=lambda d, names: [
                n for n in names if (Path(d) / n).resolve() in skip])
            args = [sys.executable, "-c", _DRIVER, sandbox.VENV,
                    f"{sandbox.WORKSPACE}/requirements.txt", uv or "", *_parent_sites()]
            wrapped = sandbox.bwrap_command(args, src, home, workspace_writable=True,
                                            venv=venv, venv_writable=True,
                                            tmp_bytes=min(max_bytes, 1024 * 2**20),
                                            readonly=source_mounts)
            argv, fds, cwd = wrapped.argv, wrapped.pass_fds, str(src)
            env = sandbox.minimal_env(Path(sandbox.WORKSPACE), Path(sandbox.WORKER_DIR), sources,
                                      tmpdir=f"{sandbox.WORKER_DIR}")
        else:
            wrapped = None
            argv = [sys.executable, "-c", _DRIVER, str(venv), str(workspace / "requirements.txt"),
                    uv or "", *_parent_sites()]
            fds, cwd = (), str(workspace)
            env = sandbox.minimal_env(workspace, home, sources)
        env.pop("PYTHONPATH", None)
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=cwd, env=env, pass_fds=fds,
                                    start_new_session=True)
            if wrapped:
                wrapped.close()
            problem = _watch(proc, timeout, max_bytes, venv, scratch)
        if problem is None and proc.returncode == 0:
            return
        text = log_path.read_text(errors="replace")
        own = [ln.strip() for ln in text.splitlines() if _OWN_LINE.match(ln)][-8:]
        detail = redact("\n".join(own), [str(rltune_home()), str(venv.parent), str(workspace),
                                         str(scratch)])
        log.warning("building the environment %s failed (%s); full output in %s", venv.name,
                    problem or f"exit code {proc.returncode}", log_path)
        shutil.rmtree(venv, ignore_errors=True)
        raise ConfigError(
            f"building the environment for requirements.txt failed: "
            f"{problem or f'the installer exited with code {proc.returncode}'}"
            + (f"\n{detail}" if detail else "")
            + f"\n(the full output is in the server's {log_path.name})",
            where="requirements.txt",
            hint="fix the failing requirement line, or install it into the server's "
                 "environment" if problem is None else
                 f"make the build smaller or faster, or raise {TIMEOUT_ENV} / {MAX_MB_ENV}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _watch(proc: subprocess.Popen, timeout: float, max_bytes: int, *roots: Path
           ) -> Optional[str]:
    """Wait for ``proc``; stop it (its whole session) past the time or size limit."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        problem = None
        if time.monotonic() > deadline:
            problem = f"stopped after the time limit of {timeout:g} s ({TIMEOUT_ENV})"
        elif _size(*roots) > max_bytes:
            problem = (f"stopped when it passed the size limit of {max_bytes // 2**20} MB "
                       f"({MAX_MB_ENV})")
        if problem:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.wait()
            return problem
        time.sleep(_CHECK_EVERY_S)
    return None


def _visible_in_sandbox(exe: str) -> bool:
    """Whether ``exe`` lies in a folder the sandbox mounts (system or Python folders)."""
    real = Path(exe).resolve()
    roots = [Path(d) for d in ("/usr", *sandbox.python_dirs(sys.executable))]
    return any(root == real or root in real.parents for root in roots)


def _parent_sites() -> list[str]:
    import site

    return list(site.getsitepackages())
