"""The job executor: runs up to ``max_concurrent_jobs`` jobs, each as its own process group.

PENDING jobs start oldest first (``python -m rltune.server.jobproc <job_dir>``); a finished
process moves its job to SUCCEEDED, STOPPED (it ended early after ``stop``) or FAILED (from
``result.json`` and the exit code). Cancel
sends SIGTERM to the whole group, then SIGKILL after a grace period (3 s; 15 s on a server
with a Ray cluster, where the job stops its actors on the way out). Every state change is a
compare-and-set in the store, so a cancel racing a finish cannot be overwritten.

With the server's ``--ray-address`` the job process is a Ray driver whose function actors it
owns: they go when it closes its pools, or when Ray sees it killed (``rltune.server.cluster``).

After a restart, RUNNING jobs whose process is gone are marked FAILED with the reason; jobs
die with the server (PDEATHSIG), and ``resume`` continues them from their last checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

from rltune._process import pid_alive, signal_group, spawn_group, stop_group
from rltune.jobdir import JobDir
from rltune.server import states as S
from rltune.server.jobdata import read_log_lines
from rltune.server.jobproc import read_result

log = logging.getLogger("rltune.server.executor")
KILL_GRACE_S = 3.0
#: With functions on Ray, an orderly stop (each actor stopped, the cluster left) takes longer;
#: a job killed sooner still frees the cluster (Ray ends the actors of a dead driver).
KILL_GRACE_RAY_S = 15.0


class JobExecutor:
    """Schedules PENDING jobs and watches their processes. Owned by the server's context."""

    def __init__(self, store: Any, jobs_dir: Path, max_concurrent: int = 1,
                 poll_interval: float = 0.5, ray_address: Optional[str] = None):
        self.store = store
        #: The server's Ray cluster: jobs run their functions there (``rltune.server.cluster``).
        self.ray_address = ray_address
        self.kill_grace = KILL_GRACE_RAY_S if ray_address else KILL_GRACE_S
        self.jobs_dir = Path(jobs_dir)
        self.max_concurrent = max_concurrent
        self.poll_interval = poll_interval
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self._watchers: set[asyncio.Task] = set()
        self._wake = asyncio.Event()
        self._task: Optional[asyncio.Task] = None
        #: Called with the job id after a job SUCCEEDED or STOPPED (e.g. tuned_model_name
        #: publishing).
        self.on_success: list[Any] = []

    def job_dir(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    # ---- lifecycle
    async def start(self) -> None:
        self.recover()
        self._task = asyncio.create_task(self._loop(), name="rltune-executor")

    def recover(self) -> None:
        """Mark RUNNING jobs whose process is gone as FAILED (called once at start)."""
        running, _ = self.store.list("jobs", statuses=[S.RUNNING])
        for job in running:
            pid = job.get("pid")
            if pid_alive(pid):
                # Orphan of a server that died without its PDEATHSIG firming: stop it so the
                # job's state is decided here, and say so.
                signal_group(pid, signal.SIGKILL)
            reason = ("the job process was gone when the server restarted (the server stopped "
                      f"while it ran); continue it with `rltune resume {job['id']}`")
            self._finish(job["id"], S.FAILED, error=reason)

    async def stop(self) -> None:
        """Stop scheduling; running jobs are stopped and marked FAILED (resumable)."""
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for job_id in list(self.procs):
            self.store.update("jobs", job_id, expect_status=[S.RUNNING], status=S.FAILED,
                              finished_at=time.time(),
                              error="the server stopped while the job ran; continue it with "
                                    f"`rltune resume {job_id}`")
            await self.kill(job_id)
        for t in list(self._watchers):
            t.cancel()

    def wake(self) -> None:
        self._wake.set()

    # ---- scheduling
    async def _loop(self) -> None:
        while True:
            try:
                await self._schedule()
            except Exception:  # keep scheduling; the store or a spawn may fail transiently
                log.exception("scheduler pass failed")
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)

    async def _schedule(self) -> None:
        while len(self.procs) < self.max_concurrent:
            pending, _ = self.store.list("jobs", statuses=[S.PENDING], limit=1)
            if not pending:
                return
            job = pending[0]
            claimed = self.store.update("jobs", job["id"], expect_status=[S.PENDING],
                                        status=S.RUNNING, started_at=time.time(), pid=None,
                                        error=None)
            if claimed is None:
                continue  # canceled meanwhile
            try:
                await self._spawn(claimed)
            except Exception as exc:
                self._finish(job["id"], S.FAILED, error=f"could not start the job process: {exc}")

    async def _spawn(self, job: dict[str, Any]) -> None:
        job_dir = self.job_dir(job["id"])
        cmd = [sys.executable, "-m", "rltune.server.jobproc", str(job_dir)]
        if job.get("resume_from"):
            cmd += ["--resume", job["resume_from"]]
        if self.ray_address:
            cmd += ["--ray-address", self.ray_address]
        JobDir(job_dir).result.unlink(missing_ok=True)
        proc = await spawn_group(cmd, log_path=JobDir(job_dir).process_log, cwd=job_dir)
        self.procs[job["id"]] = proc
        self.store.update("jobs", job["id"], pid=proc.pid)
        watcher = asyncio.create_task(self._watch(job["id"], proc))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, job_id: str, proc: asyncio.subprocess.Process) -> None:
        rc = await proc.wait()
        signal_group(proc.pid, signal.SIGKILL)  # stragglers of the group (workers, engine threads)
        self.procs.pop(job_id, None)
        result = read_result(self.job_dir(job_id)) or {}
        if rc == 0 and result.get("status") in (S.SUCCEEDED, S.STOPPED):
            self._finish(job_id, result["status"], exit_code=rc)
            for hook in self.on_success:
                try:
                    await asyncio.to_thread(hook, job_id)
                except Exception:  # a hook never decides the job's state
                    log.exception("end-of-job hook failed for %s", job_id)
        else:
            error = result.get("error") or self._tail(job_id) or f"exit code {rc}"
            self._finish(job_id, S.FAILED, error=error, exit_code=rc)
        self.wake()

    def _tail(self, job_id: str) -> str:
        lines, _ = read_log_lines(self.job_dir(job_id), 1, 10**6, source="process")
        return "\n".join(lines[-5:])

    def _finish(self, job_id: str, status: str, **fields: Any) -> None:
        self.store.update("jobs", job_id, expect_status=[S.RUNNING], status=status,
                          finished_at=time.time(), **fields)

    # ---- cancel
    async def kill(self, job_id: str, grace: Optional[float] = None) -> bool:
        """SIGTERM the job's process group, SIGKILL after ``grace`` s (default
        ``kill_grace``); True once it is gone."""
        grace = self.kill_grace if grace is None else grace
        proc = self.procs.get(job_id)
        if proc is None:
            job = self.store.get("jobs", job_id)
            pid = (job or {}).get("pid")
            if pid_alive(pid):
                signal_group(pid, signal.SIGKILL)
            return not pid_alive(pid)
        return await stop_group(proc, grace)
