"""When each step's rollouts run relative to the updates: the one place the pipeline overlaps.

``StepScheduler.run_step(step)`` returns the step's ``StepResult`` (as ``StepRunner.train``
does); ``data_order()`` is the sampler state a checkpoint saved after that step must hold;
``close()`` cancels rollouts sampled ahead. ``loop.py`` sees nothing else.

* ``max_staleness: 0`` (default): ``StepRunner.train``: collect → update → sync, as ever.
* ``max_staleness: 1``: as soon as step k's rollouts are in, step k+1's start sampling from
  the engine's current weights while step k computes its rows and updates. The new weights
  reach the engine when the update ends (``partial_rollouts: true``: rollouts in flight carry
  on with the new weights from their next call) or once step k+1's rollouts have all finished
  (``false``: no rollout mixes two versions). Either way step k+1 trains on tokens at most one
  version old; the loss corrects for it (decoupled PPO: ``losses.ppo_clip_loss_BT`` with a
  behaviour weight) and anything staler is dropped (``staleness.drop_stale``).

Every step reports ``fully_async/*``: staleness, token share per version, dropped rollouts
and how long the engine (no rollout running) and the trainer (no rows, update or sync
running) sat idle during the step.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Optional

from rltune.trainer.staleness import drop_stale, staleness_metrics
from rltune.trainer.step import Collected, StepResult, StepRunner


class BusyClock:
    """Accumulates the time during which at least one task of a kind runs.

    >>> c = BusyClock(); c.start(); c.start(); c.stop(); c.stop(); c.busy() >= 0
    True
    """

    def __init__(self) -> None:
        self.total, self.active, self.since = 0.0, 0, 0.0

    def start(self) -> None:
        if self.active == 0:
            self.since = time.perf_counter()
        self.active += 1

    def stop(self) -> None:
        self.active -= 1
        if self.active == 0:
            self.total += time.perf_counter() - self.since

    def busy(self, now: Optional[float] = None) -> float:
        """Busy seconds up to ``now``."""
        now = time.perf_counter() if now is None else now
        return self.total + (now - self.since if self.active else 0.0)


def idle_metrics(window_s: float, engine_busy_s: float, trainer_busy_s: float
                 ) -> dict[str, float]:
    """``fully_async/idle/*`` for one step of ``window_s`` seconds."""
    window = max(window_s, 1e-9)
    engine = max(0.0, window_s - engine_busy_s)
    trainer = max(0.0, window_s - trainer_busy_s)
    return {"fully_async/idle/engine_s": engine, "fully_async/idle/trainer_s": trainer,
            "fully_async/idle/engine_share": engine / window,
            "fully_async/idle/trainer_share": trainer / window}


class StepScheduler:
    """Runs the job's steps with up to ``max_staleness`` steps of rollouts sampled ahead."""

    def __init__(self, steps: StepRunner, *, total_steps: int, max_staleness: int,
                 partial_rollouts: bool):
        self.steps, self.rt, self.sampler = steps, steps.rt, steps.sampler
        self.total_steps = total_steps
        self.max_staleness, self.partial = max_staleness, partial_rollouts
        self.engine_clock, self.trainer_clock = BusyClock(), BusyClock()
        self._pending: Optional[asyncio.Task] = None
        self._order: Optional[dict[str, Any]] = None  # sampler state before the pending step

    async def run_step(self, step: int) -> StepResult:
        if self.max_staleness == 0:
            return self._sync_metrics(await self.steps.train(step))
        return await self._async_step(step)

    def data_order(self) -> dict[str, Any]:
        """The sampler state right after the last step run (before any rollout sampled ahead):
        a resumed job re-collects the pending step from there."""
        return self._order if self._pending is not None and self._order else \
            self.sampler.state_dict()

    async def close(self) -> None:
        """Cancel rollouts sampled ahead (a job that ends early or fails)."""
        task, self._pending = self._pending, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    # ------------------------------------------------------------------ internals

    def _sync_metrics(self, result: StepResult) -> StepResult:
        m = result.metrics
        rollout = m.get("timing/s/rollout", 0.0)
        m.update(idle_metrics(m["timing/s/step"], rollout, m["timing/s/step"] - rollout))
        version = self.rt.engine.weight_version - (1 if result.updated else 0)
        m.update(staleness_metrics(result.results, policy_version=version, dropped=0))
        return result

    def _start(self, step: int) -> asyncio.Task:
        async def gather() -> Collected:
            self.engine_clock.start()
            try:
                return await self.steps.gather(step)
            finally:
                self.engine_clock.stop()

        return asyncio.create_task(gather(), name=f"rltune-rollouts-step-{step}")

    async def _async_step(self, step: int) -> StepResult:
        t0 = time.perf_counter()
        engine0, trainer0 = self.engine_clock.busy(t0), self.trainer_clock.busy(t0)
        self.steps.memory.start()
        if self._pending is None:
            self._pending = self._start(step)
        collected: Collected = await self._pending
        self._pending = None
        self._order = self.sampler.state_dict()
        if step < self.total_steps:  # the next step samples while this one learns
            self._pending = self._start(step + 1)
        version = self.rt.engine.weight_version  # the policy's weights == the engine's now
        stale = staleness_metrics(collected.results, policy_version=version, dropped=0)
        stale["fully_async/dropped_stale_rollouts"] = float(drop_stale(
            collected.results, policy_version=version, max_staleness=self.max_staleness))
        self.trainer_clock.start()
        try:
            result = await self.steps.learn(collected, sleep_engine=False)
        finally:
            self.trainer_clock.stop()
        if result.updated:
            if not self.partial and self._pending is not None:
                # whole rollouts on one version: the weights change once they are in
                await asyncio.wait([self._pending])
            self.trainer_clock.start()
            try:
                result.metrics["timing/s/sync"] = await self.steps.sync()
            finally:
                self.trainer_clock.stop()
        self.steps.finish(result, t0)
        t1 = time.perf_counter()
        result.metrics.update(stale)
        result.metrics.update(idle_metrics(t1 - t0, self.engine_clock.busy(t1) - engine0,
                                           self.trainer_clock.busy(t1) - trainer0))
        return result
