"""The pool's control loop: reap dead workers, enforce ``memory_size``, scale out and in.

Every ``scale_interval`` seconds:

- a worker that exited is replaced (its in-flight calls are retried by ``pool.call``);
- a worker whose RSS exceeds ``memory_size`` MB is killed and replaced, and the calls on it
  fail with ``error_code="memory_exceeded"`` once their retries are spent;
- scale out by one worker (up to ``max_capacity``) when (in flight + queued) / (workers ×
  concurrency) ≥ ``concurrency_scale_threshold``, or mean RSS / ``memory_size`` ≥
  ``memory_scale_threshold``;
- scale in by one worker (down to ``min_capacity``) that has been idle ``scale_in_cooldown`` s;
- every ``health_interval`` s a busy worker's ``/health`` is probed: one that does not answer in
  ``hang_timeout`` s (its event loop is stuck) is killed and replaced, and its calls retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from rltune.functions import failures as F
from rltune.functions.pool import exit_reason

if TYPE_CHECKING:
    from rltune.functions.pool import FunctionPool

log = logging.getLogger("rltune.functions.scaler")
_MB = 2**20


class Autoscaler:
    def __init__(self, pool: FunctionPool):
        self.pool = pool
        self.runtime = pool.runtime

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the control loop must survive its own bugs
                log.exception("autoscaler tick failed")
            await asyncio.sleep(self.pool.scale_interval)

    def utilisation(self) -> float:
        pool = self.pool
        slots = len(pool.workers) * self.runtime.concurrency
        demand = sum(w.in_flight for w in pool.workers) + pool.queued
        if slots == 0:
            return float("inf") if demand else 0.0
        return demand / slots

    async def tick(self) -> None:
        pool, rt = self.pool, self.runtime
        limit = rt.memory_size * _MB
        rss_total = 0
        for w in list(pool.workers):
            if not w.handle.is_alive():
                pool.mark_dead(w, exit_reason(w.handle))
                continue
            rss = w.handle.rss_bytes()
            if rss > limit:
                pool.mark_dead(
                    w, f"was killed: RSS {rss / _MB:.0f} MB exceeded memory_size "
                       f"{rt.memory_size} MB (raise runtime.memory_size or use less memory)",
                    code=F.MEMORY_EXCEEDED)
                continue
            rss_total += rss
            self.maybe_probe(w)
        n = len(pool.workers)
        planned = n + pool.starting
        if planned < rt.min_capacity:
            for _ in range(rt.min_capacity - planned):
                pool.add_worker_soon("min_capacity")
            return
        if pool.start_error and pool.starting == 0 and n == 0 and pool.queued == 0:
            return  # setup keeps failing and nobody is waiting: don't spin restarting it
        mem_ratio = rss_total / (n * limit) if n else 0.0
        if planned < rt.max_capacity and pool.starting == 0 and (
            self.utilisation() >= rt.concurrency_scale_threshold
            or mem_ratio >= rt.memory_scale_threshold
        ):
            pool.counters["scale_outs"] += 1
            pool.add_worker_soon(f"scale out: utilisation {self.utilisation():.2f}, "
                                 f"memory {mem_ratio:.2f}")
            return
        if n > rt.min_capacity and pool.queued == 0:
            now = time.monotonic()
            idle = [w for w in pool.workers if w.in_flight == 0 and w.available
                    and now - w.idle_since >= pool.spec.scale_in_cooldown]
            if idle:
                await self.retire(idle[-1])

    def maybe_probe(self, worker) -> None:
        spec = self.pool.spec
        now = time.monotonic()
        due = now - worker.last_probe >= spec.health_interval
        if worker.probing or worker.in_flight == 0 or not due:
            return
        worker.probing = True
        worker.last_probe = now

        async def probe() -> None:
            from rltune.functions.http import WorkerConnectionError, WorkerTimeout

            try:
                await worker.http.request("GET", "/health", timeout=spec.hang_timeout)
            except WorkerTimeout:
                self.pool.mark_dead(worker, f"hung: /health unanswered for {spec.hang_timeout} s "
                                            "(a call blocks its event loop; use def process or "
                                            "await instead of blocking)", code=F.WORKER_HUNG)
            except WorkerConnectionError:
                pass  # it died; the reaper handles that
            finally:
                worker.probing = False

        task = asyncio.ensure_future(probe())
        self.pool._tasks.add(task)
        task.add_done_callback(self.pool._tasks.discard)

    async def retire(self, worker) -> None:
        pool = self.pool
        worker.retiring = True  # no new calls; it has none in flight
        pool.workers.remove(worker)
        pool.counters["scale_ins"] += 1
        log.info("%s: scale in: stopping idle worker %s", pool.spec.display_name,
                 worker.handle.worker_id)
        await worker.handle.stop(grace=2.0)
