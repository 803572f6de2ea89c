"""When each step's rollouts run relative to the updates: the one place the pipeline overlaps.

``StepScheduler.run_step(step)`` returns the step's ``StepResult`` (as ``StepRunner.train``
does); ``data_order()`` is the sampler state a checkpoint saved after that step must hold;
``close()`` cancels rollouts sampled ahead. ``loop.py`` sees nothing else.

* ``max_staleness: 0`` (default): ``StepRunner.train``: collect → update → sync, as ever.
* ``max_staleness: N >= 1``: streaming rollouts (``trainer/stream.py``). Groups sample
  continuously; a step takes the first ``batch_size`` groups that finish while the others
  carry over, and new groups start as long as they would be at most N versions behind the
  policy that trains on them. The step's update runs while the stream keeps sampling. The new
  weights reach the engine when the update ends (``partial_rollouts: true``: rollouts in flight
  carry on with the new weights from their next call) or once the running groups have finished
  (``false``: no rollout mixes two versions; new groups wait for the sync). The loss corrects
  for the staleness (decoupled PPO: ``losses.ppo_clip_loss_BT`` with a behaviour weight) and
  anything staler than N is dropped, counted and replaced.

Every step reports ``fully_async/*``: staleness, token share per version, dropped rollouts,
the stream's carried-over / running / replaced groups, and how long the engine (no rollout
running) and the trainer (no rows, update or sync running) sat idle during the step.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from rltune.trainer.staleness import staleness_metrics
from rltune.trainer.step import Collected, StepResult, StepRunner
from rltune.trainer.stream import GroupStream


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
        self.stream: Optional[GroupStream] = None
        if max_staleness:
            hp, knobs = self.rt.hp, self.rt.knobs
            self.stream = GroupStream(
                steps, batch_size=hp.batch_size, n_rollouts=hp.n_rollouts,
                max_staleness=max_staleness, total_steps=total_steps,
                version=lambda: self.rt.engine.weight_version,
                dynamic_sampling=knobs.dynamic_sampling,
                max_sampling_rounds=knobs.max_sampling_rounds,
                on_start=self.engine_clock.start, on_stop=self.engine_clock.stop)

    async def run_step(self, step: int) -> StepResult:
        if self.max_staleness == 0:
            return self._sync_metrics(await self.steps.train(step))
        return await self._async_step(step)

    def data_order(self) -> dict[str, Any]:
        """The sampler state a resumed job continues from: with streaming, the state before
        the oldest prompt batch that has a group not yet trained (``GroupStream.data_order``)."""
        order = self.stream.data_order() if self.stream is not None else None
        return order or self.sampler.state_dict()

    async def close(self) -> None:
        """Cancel rollouts sampled ahead (a job that ends early or fails)."""
        if self.stream is not None:
            await self.stream.close()

    # ------------------------------------------------------------------ internals

    def _sync_metrics(self, result: StepResult) -> StepResult:
        m = result.metrics
        rollout = m.get("timing/s/rollout", 0.0)
        m.update(idle_metrics(m["timing/s/step"], rollout, m["timing/s/step"] - rollout))
        version = self.rt.engine.weight_version - (1 if result.updated else 0)
        m.update(staleness_metrics(result.results, policy_version=version, dropped=0))
        return result

    async def _async_step(self, step: int) -> StepResult:
        assert self.stream is not None
        t0 = time.perf_counter()
        engine0, trainer0 = self.engine_clock.busy(t0), self.trainer_clock.busy(t0)
        self.steps.memory.start()
        taken = await self.stream.take(step)  # the first batch_size groups to finish
        version = self.rt.engine.weight_version  # the policy's weights == the engine's now
        stale = staleness_metrics(taken.results, policy_version=version, dropped=0)
        stale.update(taken.metrics)
        self.trainer_clock.start()
        try:
            collected = Collected(step, taken.results, taken.rounds, taken.seconds)
            result = await self.steps.learn(collected, sleep_engine=False)
        finally:
            self.trainer_clock.stop()
        if result.updated:
            if not self.partial:  # whole rollouts on one version: drain before the sync
                await self.stream.drain()
            self.trainer_clock.start()
            try:
                result.metrics["timing/s/sync"] = await self.steps.sync()
            finally:
                self.trainer_clock.stop()
        self.stream.advance()  # new groups start on the new weights
        self.steps.finish(result, t0)
        t1 = time.perf_counter()
        result.metrics.update(stale)
        result.metrics.update(idle_metrics(t1 - t0, self.engine_clock.busy(t1) - engine0,
                                           self.trainer_clock.busy(t1) - trainer0))
        return result
