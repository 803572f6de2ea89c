"""The function pool: N worker processes for one component, one async ``call`` for the trainer.

``call`` never raises for a user or worker failure: after bounded retries it returns the output
model with ``status=FAILED`` and the error. A crashed or killed worker is replaced; calls that
were on it are retried on another worker (at most ``spec.max_retries`` times). Calls that run
past ``spec.timeout`` fail with ``error_code="timeout"`` without a retry (it would only time out
again). Every ``scale_interval`` seconds the pool's control loop takes a snapshot of its workers,
asks ``rltune.functions.scaler.decide`` what to do (reap, kill for memory, probe, scale out or
in) and does it; the pool is the only writer of its own state.

Example:
    >>> import asyncio
    >>> from rltune.functions import FunctionComponentSpec, FunctionPool
    >>> async def demo(ws):
    ...     spec = FunctionComponentSpec(classpath="functions.trivial.Trivial",
    ...                                  func_type="reward", workspace=ws)
    ...     async with await FunctionPool.start(spec) as pool:
    ...         out = await pool.call({"agent_output": {"messages": []}})
    ...         return out.reward.reward_score
    >>> asyncio.run(demo("tests/functions/fixtures/ws"))  # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import deque
from typing import Any, Optional
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from rltune.functions import failures as F
from rltune.functions.auth import HEADER
from rltune.functions.backends.base import WorkerBackend, WorkerHandle
from rltune.functions.http import WorkerConnectionError, WorkerHTTPClient, WorkerTimeout
from rltune.functions.metrics import LatencyWindow, PoolMetrics, WorkerMetrics
from rltune.functions.scaler import (
    Action,
    Kill,
    PoolSnapshot,
    Probe,
    Reap,
    Retire,
    ScalePolicy,
    Start,
    WorkerState,
    decide,
)
from rltune.functions.spec import FunctionComponentSpec, max_processes
from rltune.sdk.data import INPUT_MODELS, TaskStatus
from rltune.sdk.errors import ValidationError

log = logging.getLogger("rltune.functions.pool")
_HANG_GRACE_S = 0.5  # the worker answers 504 at `timeout`; past this grace it counts as hung
#: Memory kills in a row (no call answered in between) after which the pool gives up
#: (``PoolBroken``): a worker whose baseline exceeds ``runtime.memory_size`` never serves.
MEMORY_KILLS_IN_A_ROW = 3


def exit_reason(handle: WorkerHandle) -> str:
    """How a worker ended plus the end of its output (the user's traceback, usually)."""
    tail = handle.log_tail(800).strip()
    return handle.exit_description() + (f"; its last output:\n{tail}" if tail else "")


#: Workers a pool may run per CPU core (a worker serves ``concurrency`` calls at once; more
#: processes than this only compete for the cores while they import and start).
WORKERS_PER_CORE = 2


def machine_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def fit_to_machine(runtime: Any, name: str) -> Any:
    """``runtime`` with ``capacity``/``min_capacity``/``max_capacity`` capped at what this machine
    can start (``WORKERS_PER_CORE`` × cores); the cap is logged with the numbers."""
    cores = machine_cores()
    limit = max(1, WORKERS_PER_CORE * cores)
    if runtime.max_capacity <= limit:
        return runtime
    capped = {k: min(getattr(runtime, k), limit)
              for k in ("capacity", "min_capacity", "max_capacity")}
    log.warning("%s: runtime asks for capacity %s (min %s, max %s) but this machine has %d CPU "
                "core(s); capped at %d workers (%d per core), each serving up to %d calls at "
                "once", name, runtime.capacity, runtime.min_capacity, runtime.max_capacity,
                cores, limit, WORKERS_PER_CORE, runtime.concurrency)
    return runtime.model_copy(update=capped)


class _Worker:
    """The pool's view of one worker."""

    def __init__(self, handle: WorkerHandle):
        self.handle = handle
        parsed = urlsplit(handle.base_url)
        self.http = WorkerHTTPClient(parsed.hostname or "127.0.0.1", parsed.port or 80,
                                     headers={HEADER: handle.token} if handle.token else None)
        self.in_flight = 0
        self.idle_since = time.monotonic()
        self.death_reason: Optional[str] = None
        self.death_code = F.WORKER_CRASHED
        self.retiring = False
        self.probing = False
        self.last_probe = time.monotonic()

    @property
    def available(self) -> bool:
        return self.death_reason is None and not self.retiring


class FunctionPool:
    """Workers for one function component. Create with ``await FunctionPool.start(spec)``."""

    def __init__(self, spec: FunctionComponentSpec, backend: Optional[WorkerBackend] = None,
                 *, scale_interval: float = 0.2):
        from rltune.functions.backends.local import LocalProcessBackend

        self.spec = spec
        self.backend = backend or LocalProcessBackend()
        self.runtime = self.backend.fit_runtime(spec.resolved_runtime(), spec.display_name)
        self.scale_interval = scale_interval
        rt = self.runtime
        self.policy = ScalePolicy(
            concurrency=rt.concurrency, min_capacity=rt.min_capacity,
            max_capacity=rt.max_capacity, memory_size_mb=rt.memory_size,
            concurrency_scale_threshold=rt.concurrency_scale_threshold,
            memory_scale_threshold=rt.memory_scale_threshold,
            scale_in_cooldown=spec.scale_in_cooldown, health_interval=spec.health_interval,
            max_processes=max_processes())
        self.workers: list[_Worker] = []
        self.starting = 0
        self.queued = 0
        self.start_error: Optional[str] = None
        #: Set once the pool gave up (``MEMORY_KILLS_IN_A_ROW``); every call raises it.
        self.broken: Optional[F.PoolBroken] = None
        self._memory_kills: list[Kill] = []
        self.counters = dict.fromkeys(
            ("calls", "succeeded", "failures", "retries", "restarts", "scale_outs", "scale_ins"), 0
        )
        self.latency = LatencyWindow()
        self._ids = itertools.count(1)
        self._waiters: deque[asyncio.Future] = deque()
        self._input_model = INPUT_MODELS[spec.func_type]
        self._output_model = F.output_model(spec.func_type)
        self._scaler_task: Optional[asyncio.Task] = None
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    # ---- lifecycle -------------------------------------------------------------------------
    @classmethod
    async def start(cls, spec: FunctionComponentSpec, backend: Optional[WorkerBackend] = None,
                    **kwargs: Any) -> FunctionPool:
        """Start ``runtime.capacity`` workers (raise ``UserCodeError`` if setup fails)."""
        pool = cls(spec, backend, **kwargs)
        try:
            n = pool.runtime.capacity or 0
            pool.starting += n
            handles = await asyncio.gather(*(pool._spawn() for _ in range(n)))
            pool.workers.extend(_Worker(h) for h in handles)
        except BaseException:
            await pool.close()
            raise
        pool._scaler_task = asyncio.ensure_future(pool._control_loop())
        return pool

    async def __aenter__(self) -> FunctionPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the scaler and every worker; pending calls get an explicit failure."""
        self._closed = True
        if self._scaler_task:
            self._scaler_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._wake(all_waiters=True)
        await asyncio.gather(*(w.handle.stop(grace=2.0) for w in self.workers),
                             return_exceptions=True)
        for w in self.workers:
            w.http.close()
        self.workers.clear()
        await self.backend.close()

    async def _spawn(self) -> WorkerHandle:
        worker_id = f"{self.spec.func_type.value}-w{next(self._ids)}"
        try:
            return await self.backend.start_worker(self.spec, worker_id)
        finally:
            self.starting -= 1

    def add_worker_soon(self, reason: str) -> None:
        """Start one more worker in the background (scale-out or replacement)."""
        async def grow() -> None:
            try:
                handle = await self._spawn()
            except Exception as exc:
                self.start_error = str(exc)
                log.error("%s: starting a worker (%s) failed: %s", self.spec.display_name,
                          reason, exc)
                self._wake(all_waiters=True)
                return
            if self._closed or self.broken is not None:
                await handle.stop()
                return
            self.start_error = None
            self.workers.append(_Worker(handle))
            log.info("%s: worker %s up (%s)", self.spec.display_name, handle.worker_id, reason)
            self._wake(all_waiters=True)

        self.starting += 1  # counted now, not when the task runs: the next snapshot reads it
        task = asyncio.ensure_future(grow())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def mark_dead(self, worker: _Worker, reason: str, code: str = F.WORKER_CRASHED) -> None:
        """Take a worker out of rotation for good, kill it and start a replacement."""
        if worker.death_reason is not None:
            return
        worker.death_reason = reason
        worker.death_code = code
        worker.handle.kill()
        worker.http.close()
        if worker in self.workers:
            self.workers.remove(worker)
        self.counters["restarts"] += 1
        replace = not self._closed and self.broken is None
        log.warning("%s: worker %s %s%s", self.spec.display_name, worker.handle.worker_id,
                    reason, "; replacing it" if replace else "")
        if replace:
            self.add_worker_soon("replacement")

    # ---- the control loop: snapshot -> scaler.decide -> apply ----------------------------
    async def _control_loop(self) -> None:
        while True:
            try:
                await self.apply(decide(self.snapshot()))
            except asyncio.CancelledError:
                raise
            except Exception:  # the control loop must survive its own bugs
                log.exception("%s: control loop tick failed", self.spec.display_name)
            await asyncio.sleep(self.scale_interval)

    def snapshot(self) -> PoolSnapshot:
        """The facts ``scaler.decide`` reads: liveness, RSS and load of every worker."""
        states = []
        for w in self.workers:
            alive = w.handle.is_alive()
            states.append(WorkerState(
                w.handle.worker_id, alive=alive, rss_bytes=w.handle.rss_bytes() if alive else 0,
                processes=w.handle.process_count() if alive else 0,
                in_flight=w.in_flight, available=w.available, idle_since=w.idle_since,
                last_probe=w.last_probe, probing=w.probing))
        return PoolSnapshot(now=time.monotonic(), policy=self.policy, workers=tuple(states),
                            starting=self.starting, queued=self.queued,
                            start_failing=bool(self.start_error))

    async def apply(self, actions: list[Action]) -> None:
        """Carry out ``decide``'s actions (a worker gone since the snapshot is skipped)."""
        by_id = {w.handle.worker_id: w for w in self.workers}
        for action in actions:
            if isinstance(action, Start):
                if self.broken is not None:
                    continue
                if action.scale_out:
                    self.counters["scale_outs"] += 1
                for _ in range(action.count):
                    self.add_worker_soon(action.reason)
                continue
            worker = by_id.get(action.worker_id)
            if worker is None or worker not in self.workers:
                continue
            if isinstance(action, Reap):
                self.mark_dead(worker, exit_reason(worker.handle))
            elif isinstance(action, Kill):
                if action.code == F.MEMORY_EXCEEDED:
                    self._memory_kill(action)
                self.mark_dead(worker, action.reason, code=action.code)
            elif isinstance(action, Probe):
                self._probe(worker)
            elif isinstance(action, Retire):
                await self._retire(worker)

    def _memory_kill(self, kill: Kill) -> None:
        """Count a memory kill; at ``MEMORY_KILLS_IN_A_ROW`` the pool gives up, naming
        ``runtime.memory_size`` and the RSS measured."""
        self._memory_kills.append(kill)
        kills = self._memory_kills
        if len(kills) < MEMORY_KILLS_IN_A_ROW or self.broken is not None:
            return
        low, high = (f(k.rss_bytes for k in kills) / 2**20 for f in (min, max))
        calls = "no call in flight" if all(k.idle for k in kills) else "calls in flight"
        name, limit = self.spec.display_name, self.runtime.memory_size
        self.broken = F.PoolBroken(
            f"{len(kills)} workers in a row were killed for memory ({calls}): RSS {low:.0f} to "
            f"{high:.0f} MB against runtime.memory_size {limit} MB; the lowest, a worker's "
            f"measured baseline after setup, is {low:.0f} MB, so the pool gave up instead of "
            "replacing them again",
            where=f"{name}: runtime.memory_size",
            hint=f"raise runtime.memory_size to at least {int(high * 1.25) + 1} MB, or make "
                 "the function use less memory")
        log.error("%s", self.broken)
        self._wake(all_waiters=True)

    def _probe(self, worker: _Worker) -> None:
        """Ask a busy worker's ``/health`` in the background; kill it if it hangs."""
        worker.probing = True
        worker.last_probe = time.monotonic()
        hang = self.spec.hang_timeout

        async def probe() -> None:
            try:
                await worker.http.request("GET", "/health", timeout=hang)
            except WorkerTimeout:
                self.mark_dead(worker, f"hung: /health unanswered for {hang} s (a call blocks "
                                       "its event loop; use def process or await instead of "
                                       "blocking)", code=F.WORKER_HUNG)
            except WorkerConnectionError:
                pass  # it died; the next snapshot reaps it
            finally:
                worker.probing = False

        task = asyncio.ensure_future(probe())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _retire(self, worker: _Worker) -> None:
        worker.retiring = True  # no new calls; it has none in flight
        self.workers.remove(worker)
        self.counters["scale_ins"] += 1
        log.info("%s: scale in: stopping idle worker %s", self.spec.display_name,
                 worker.handle.worker_id)
        await worker.handle.stop(grace=2.0)

    # ---- dispatch --------------------------------------------------------------------------
    def _pick(self) -> Optional[_Worker]:
        best = None
        limit = self.runtime.concurrency
        for w in self.workers:
            if w.available and w.in_flight < limit and (
                best is None or w.in_flight < best.in_flight
            ):
                best = w
        return best

    def _wake(self, all_waiters: bool = False) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                if not all_waiters:
                    return

    async def _acquire(self) -> Optional[_Worker]:
        """A worker with a free slot; None when the pool is closed or cannot start workers."""
        loop = asyncio.get_running_loop()
        while True:
            if self._closed or self.broken is not None:
                return None
            worker = self._pick()
            if worker is not None:
                worker.in_flight += 1
                return worker
            if self.start_error and not self.workers and not self.starting:
                return None
            fut = loop.create_future()
            self._waiters.append(fut)
            self.queued += 1
            try:
                await fut
            finally:
                self.queued -= 1

    def _release(self, worker: _Worker) -> None:
        worker.in_flight -= 1
        if worker.in_flight == 0:
            worker.idle_since = time.monotonic()
        self._wake()

    # ---- the call --------------------------------------------------------------------------
    async def call(self, input_data: Any, *, headers: Optional[dict[str, str]] = None) -> Any:
        """Run one call; return the output model (status FAILED with the error on failure).

        ``input_data`` is the input model or a dict of it; a dict that does not validate raises
        ``rltune.sdk.errors.ValidationError`` (that is the caller's bug, not the function's);
        once the pool gave up on its function every call raises ``failures.PoolBroken``.
        """
        if self.broken is not None:
            raise self.broken
        if isinstance(input_data, BaseModel):
            payload = input_data.to_wire() if hasattr(input_data, "to_wire") else (
                input_data.model_dump(mode="json"))
        else:
            try:
                payload = self._input_model.model_validate(input_data).to_wire()
            except PydanticValidationError as exc:
                raise ValidationError(
                    f"input does not fit {self._input_model.__name__}: {exc}",
                    where=self.spec.display_name,
                    hint="build the input with the function type's input model",
                ) from exc
        body = orjson.dumps(payload)
        self.counters["calls"] += 1
        started = time.monotonic()
        out = await self._call_with_retries(body, headers)
        self.latency.add(time.monotonic() - started)
        self.counters["succeeded" if out.status == TaskStatus.SUCCESS else "failures"] += 1
        return out

    async def _call_with_retries(self, body: bytes, headers: Optional[dict[str, str]]) -> Any:
        ftype = self.spec.func_type
        attempts = 0
        busy_retries = 0
        timeout = self.spec.timeout
        while True:
            worker = await self._acquire()
            if worker is None and self.broken is not None:
                raise self.broken
            if worker is None:
                reason = self.start_error or "the pool is closed"
                return F.failed_output(ftype, f"no worker can take the call: {reason}",
                                       code=F.NO_WORKERS)
            try:
                status, content = await worker.http.post(
                    "/api/v1", body, headers, timeout=timeout + _HANG_GRACE_S if timeout else None
                )
            except WorkerTimeout:
                self.mark_dead(worker, f"did not answer within timeout {timeout} s "
                                       f"(+{_HANG_GRACE_S} s grace): hung", code=F.TIMEOUT)
                return F.failed_output(ftype, f"call timed out after {timeout} s and worker "
                                              f"{worker.handle.worker_id} hung; it was replaced",
                                       code=F.TIMEOUT)
            except WorkerConnectionError as exc:
                if worker.death_reason is None:
                    await self._confirm_death(worker)
                attempts += 1
                reason = worker.death_reason or f"connection failed: {exc}"
                if attempts > self.spec.max_retries:
                    return F.failed_output(
                        ftype, f"worker {worker.handle.worker_id} {reason}; gave up after "
                               f"{attempts} attempts", code=worker.death_code)
                self.counters["retries"] += 1
                continue
            finally:
                self._release(worker)
            if status == 503 and busy_retries < 20:
                busy_retries += 1  # worker queue full: back off briefly, try again
                await asyncio.sleep(0.05 * busy_retries)
                continue
            if status == 200:
                self._memory_kills.clear()  # a worker lived to answer: not a kill loop
            return F.output_from_reply(self.spec.func_type, self._output_model, status, content)

    async def _confirm_death(self, worker: _Worker) -> None:
        # The kernel closes a dying process's sockets a moment before it can be reaped, so a
        # dropped connection may come just before the exit is visible: wait for it briefly.
        deadline = time.monotonic() + worker.handle.death_notice_s
        while time.monotonic() < deadline:
            if not worker.handle.is_alive():
                self.mark_dead(worker, exit_reason(worker.handle))
                return
            await asyncio.sleep(0.01)

    # ---- metrics ---------------------------------------------------------------------------
    def metrics(self) -> PoolMetrics:
        """Workers, in-flight, queued, counters and latency percentiles (seconds)."""
        pct = self.latency.percentiles()
        details = [
            WorkerMetrics(worker_id=w.handle.worker_id, pid=w.handle.pid, url=w.handle.url,
                          in_flight=w.in_flight, rss_mb=round(w.handle.rss_bytes() / 2**20, 1))
            for w in self.workers
        ]
        return PoolMetrics(
            name=self.spec.display_name, workers=len(self.workers), starting=self.starting,
            in_flight=sum(w.in_flight for w in self.workers), queued=self.queued,
            latency_p50_s=pct["p50"], latency_p95_s=pct["p95"], latency_p99_s=pct["p99"],
            worker_details=details, **self.counters,
        )

