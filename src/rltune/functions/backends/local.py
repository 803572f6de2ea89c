"""Workers as local processes: ``python -m rltune.functions.worker`` on 127.0.0.1.

Each worker binds port 0 and reports its port through a ready file (no port races). Output goes
to a log file per worker. On Linux the worker gets SIGKILL when the pool process dies, so a
crashed trainer leaves no orphan workers. ``runtime.cpu`` bounds the numeric libraries'
threads. The environment is built from scratch plus ``runtime.env``, and the worker runs in a
bubblewrap sandbox when one is available (``rltune.functions.sandbox``). Each worker gets its
own secret on stdin and answers only requests carrying it (``rltune.functions.auth``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import psutil

from rltune._process import descendants, describe_exit, die_with_parent, tail_file, tree_rss
from rltune.functions import sandbox
from rltune.functions.auth import new_token
from rltune.functions.backends.base import WorkerBackend, WorkerHandle
from rltune.functions.output import JobLogPipe, job_log, worker_args
from rltune.functions.spec import FunctionComponentSpec
from rltune.sdk.errors import UserCodeError

# How often rss_bytes looks for the worker's child processes again (``_process.descendants``:
# on Linux from the tree's own /proc files; elsewhere psutil walks every process on the
# machine); the pool asks for RSS five times a second per worker.
CHILDREN_REFRESH_S = 2.0

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")


#: The most a worker's ready line may hold (it is a few dozen bytes of JSON).
READY_MAX_BYTES = 64 * 1024


def _ready_info(line: bytes, where: str) -> dict:
    """The worker's ready line (the pipe's first line; function code could write there too)."""
    try:
        info = json.loads(line)
    except ValueError as exc:
        info = exc
    if not isinstance(info, dict):
        raise UserCodeError(f"the worker's ready line is not a JSON object: {line[:200]!r}",
                            where=where, hint="function code must not write to the worker's "
                                              "ready pipe")
    return info


class LocalProcessHandle(WorkerHandle):
    def __init__(self, worker_id: str, proc: subprocess.Popen, port: int, log_path: Path,
                 sandboxed: bool = False, token: Optional[str] = None):
        self.worker_id = worker_id
        self.token = token
        self.proc = proc
        self.sandboxed = sandboxed  # proc is bwrap; the worker is its grandchild
        self.pid = proc.pid
        self.base_url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._ps: Optional[psutil.Process] = None
        self._children: list[psutil.Process] = []
        self._children_at = 0.0  # time.monotonic() of the last walk

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def exit_description(self) -> str:
        return describe_exit(self.proc.poll())

    def rss_bytes(self) -> int:
        try:
            if self._ps is None:
                self._ps = psutil.Process(self.pid)
            if time.monotonic() - self._children_at >= CHILDREN_REFRESH_S:
                self._children = descendants(self._ps)
                self._children_at = time.monotonic()
        except psutil.Error:
            return 0
        return tree_rss(self._ps, self._children)

    def process_count(self) -> int:
        return 1 + len(self._children) if self._ps is not None else 0

    def kill(self) -> None:
        below: list[psutil.Process] = []
        if not self.sandboxed and self.is_alive():  # what it started would live on: find it
            with contextlib.suppress(psutil.Error):
                below = psutil.Process(self.pid).children(recursive=True)
        if self.is_alive():
            self.proc.kill()  # under bwrap its PID namespace ends with it, and all inside
        self.proc.poll()
        for child in below:
            with contextlib.suppress(psutil.Error):
                child.kill()

    def _worker_processes(self) -> list[psutil.Process]:
        """The worker's own process: ``proc``, or under bwrap the first non-bwrap process
        below it (bwrap forwards no signal; the worker must get SIGTERM to shut down, flushing
        its spans)."""
        try:
            if not self.sandboxed:
                return [psutil.Process(self.pid)]
            below = psutil.Process(self.pid).children(recursive=True)
            return [p for p in below if p.name() != "bwrap" and p.parent().name() == "bwrap"]
        except psutil.Error:
            return []

    async def stop(self, grace: float = 3.0) -> None:
        """SIGTERM (the worker finishes its server's shutdown), then SIGKILL after ``grace``."""
        if not self.is_alive():
            return
        targets = self._worker_processes()
        for p in targets:
            try:
                p.terminate()
            except psutil.Error:
                pass
        if not targets:
            self.proc.terminate()
        deadline = time.monotonic() + grace
        while self.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        self.kill()

    def log_tail(self, n_chars: int = 2000) -> str:
        return tail_file(self.log_path, n_chars)


def needs_venv(spec: FunctionComponentSpec) -> bool:
    """``build_venv=True`` always; ``"auto"`` when requirements.txt has an unsatisfied line."""
    if spec.build_venv != "auto":
        return bool(spec.build_venv)
    from rltune.functions.requirements import missing_requirements

    return bool(missing_requirements(spec.workspace))


class LocalProcessBackend(WorkerBackend):
    """Start workers as child processes of this one.

    ``log_dir`` keeps one ``<worker_id>.log`` per worker (a temp dir by default).
    ``as_user`` (a local ``rltune train``, never the job server): while
    ``RLTUNE_FUNCTION_ISOLATION`` is not set, workers run as the user's own script would, with
    this process's environment and no sandbox.
    """

    def __init__(self, log_dir: str | Path | None = None, *, as_user: bool = False):
        self.as_user = as_user and not sandbox.isolation_chosen()
        self._own_dir = log_dir is None  # a temp dir we made is removed on close
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="rltune-workers-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def fit_runtime(self, runtime, name: str):
        """Capacities capped at what this machine's cores can start (``fit_to_machine``)."""
        from rltune.functions.pool import fit_to_machine

        return fit_to_machine(runtime, name)

    async def close(self) -> None:
        if self._own_dir:
            import shutil

            shutil.rmtree(self.log_dir, ignore_errors=True)

    def worker_env(self, spec: FunctionComponentSpec, private_dir: Path,
                   sandboxed: bool = False) -> dict[str, str]:
        """The worker's whole environment: nothing of this process's but harmless variables
        (in the sandbox, with the paths the worker sees there)."""
        runtime = spec.resolved_runtime()
        threads = str(max(1, math.ceil(runtime.cpu or 1)))
        env = {var: "false" if var == "TOKENIZERS_PARALLELISM" else threads
               for var in _THREAD_VARS}
        env["RLTUNE_WORKER_CPU"] = threads
        trace_dir = os.environ.get("RLTUNE_TRACE_DIR")
        if sandboxed and trace_dir and Path(trace_dir).exists():  # mounted there
            env["RLTUNE_TRACE_DIR"] = sandbox.TRACES
        env.update(runtime.env_strings())
        if self.as_user:
            return sandbox.user_env(Path(spec.workspace), env)
        if sandboxed:
            inside = sandbox.minimal_env(Path(sandbox.WORKSPACE), Path(sandbox.WORKER_DIR), env,
                                         tmpdir="/tmp")
            if inside.get("RLTUNE_TRACE_DIR") != sandbox.TRACES:
                inside.pop("RLTUNE_TRACE_DIR", None)  # a server path, not mounted
            return inside
        return sandbox.minimal_env(Path(spec.workspace), private_dir, env)

    async def start_worker(self, spec: FunctionComponentSpec, worker_id: str) -> WorkerHandle:
        runtime = spec.resolved_runtime()
        isolation = "none" if self.as_user else sandbox.active_isolation()
        private = Path(tempfile.mkdtemp(prefix=f"{worker_id}-", dir=self.log_dir))
        log_path = self.log_dir / f"{worker_id}.log"
        python = spec.python or sys.executable
        venv = None
        if spec.build_venv and not spec.python and needs_venv(spec):
            from rltune.functions.requirements import ensure_venv
            from rltune.paths import functions_home

            venvs = functions_home() / "venvs"
            python = str(await asyncio.to_thread(ensure_venv, spec.workspace, venvs))
            venv = Path(python).parent.parent
        elif spec.python and (Path(spec.python).parent.parent / "pyvenv.cfg").is_file():
            venv = Path(spec.python).parent.parent  # built by `functions serve --build-venv`
        sandboxed = isolation == "bwrap"
        if sandboxed:  # the worker sees neutral paths; its job log is a pipe (append-only)
            python = f"{sandbox.VENV}/bin/python" if venv else python
            workspace = sandbox.WORKSPACE
            log_pipe = JobLogPipe.open(job_log())
        else:
            workspace, log_pipe = str(spec.workspace), None
        # The worker reports its port on a pipe (its /worker is a tmpfs the pool cannot see).
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        ready_arg = f"/proc/self/fd/{ready_w}"
        cmd = [
            python, "-m", "rltune.functions.worker",
            "--func-type", spec.func_type.value, "--classpath", spec.classpath,
            "--workspace", workspace, "--port", "0",
            "--concurrency", str(runtime.concurrency), "--queue-size", str(spec.queue_size),
            "--ready-file", ready_arg, "--token-stdin",
            *worker_args(spec.display_name, log_pipe.inside if log_pipe else None),
        ]
        if spec.timeout:
            cmd += ["--timeout", str(spec.timeout)]
        wrapped = None
        if sandboxed:
            trace_dir = os.environ.get("RLTUNE_TRACE_DIR")  # spans kept in the job folder
            writable = {Path(trace_dir): sandbox.TRACES} if trace_dir and \
                Path(trace_dir).exists() else {}
            wrapped = sandbox.bwrap_command(
                cmd, Path(spec.workspace).resolve(), private, venv=venv,
                tmp_bytes=runtime.memory_size * 2**20 if runtime.memory_size else None,
                private_bytes=runtime.disk_size * 2**20 if runtime.disk_size else None,
                writable=writable)
            cmd = wrapped.argv
        fds = (*(wrapped.pass_fds if wrapped else ()), *(log_pipe.pass_fds if log_pipe else ()),
               ready_w)
        try:
            with open(log_path, "ab") as log:
                # Popen in the loop's thread: PDEATHSIG fires when the *thread* that forked exits.
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                    env=self.worker_env(spec, private, sandboxed), cwd=str(spec.workspace),
                    preexec_fn=die_with_parent(), pass_fds=fds,
                )
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
            if wrapped:
                wrapped.close()  # the child holds its own copies now
        token = new_token()  # on a pipe: no other process sees it (argv and env are in /proc)
        try:
            proc.stdin.write(f"{token}\n".encode())
        except OSError:
            pass  # it died at once; the loop below reports how
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if log_pipe:
            log_pipe.started()
        try:
            return await self._wait_ready(spec, worker_id, proc, ready_r, log_path, token,
                                          sandboxed)
        except asyncio.CancelledError:  # the pool shuts down while this worker starts
            proc.kill()
            proc.wait(timeout=5)  # reaped: no zombie, no late output into the job's log
            raise
        finally:
            os.close(ready_r)

    async def _wait_ready(self, spec: FunctionComponentSpec, worker_id: str,
                          proc: subprocess.Popen, ready_r: int, log_path: Path, token: str,
                          sandboxed: bool) -> WorkerHandle:
        """The handle once the worker's ready line came; ``UserCodeError`` if it failed."""
        deadline = time.monotonic() + spec.start_timeout
        delay = 0.01
        line = b""
        while True:
            with contextlib.suppress(BlockingIOError):
                line += os.read(ready_r, 65536)
            if b"\n" in line or len(line) > READY_MAX_BYTES:
                info = _ready_info(line.split(b"\n", 1)[0][:READY_MAX_BYTES], spec.display_name)
                if info.get("ok"):
                    return LocalProcessHandle(worker_id, proc, int(info["port"]), log_path,
                                              sandboxed=sandboxed, token=token)
                proc.wait(timeout=5)
                raise UserCodeError(info.get("error", "worker failed to start"),
                                    where=info.get("where") or spec.display_name,
                                    hint=info.get("hint"))
            if proc.poll() is not None:
                tail = LocalProcessHandle(worker_id, proc, 0, log_path).log_tail()
                raise UserCodeError(
                    f"worker {worker_id} exited during start ({proc.returncode}):\n{tail}",
                    where=spec.display_name,
                    hint="run `rltune functions serve` with the same classpath to see the error",
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise UserCodeError(
                    f"worker {worker_id} did not start within {spec.start_timeout} s",
                    where=spec.display_name,
                    hint="make setup() faster or raise start_timeout",
                )
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.1)
