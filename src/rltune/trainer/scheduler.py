"""One training step, top to bottom: the one pipeline every ``max_staleness`` runs through.

``StepScheduler.run_step(step)`` is the step; ``data_order()`` is the sampler state a
checkpoint saved after that step must hold; ``close()`` cancels rollouts sampled ahead.
``loop.py`` sees nothing else.

1. **take**: the step's ``batch_size`` prompt groups from the group stream
   (``trainer/stream.py``, the only collector): groups sample continuously, the first to
   finish are taken, the others carry over. A group may start while it would be at most
   ``max_staleness`` versions behind the policy that trains on it, so ``max_staleness: 0``
   (the default, synchronous training) admits exactly one batch, whose groups all finish
   before the update; ``N >= 1`` samples up to N batches ahead, during the update. The same
   stream drops groups staler than N and, with DAPO's dynamic sampling, groups without signal
   (one refill rule, the stream's).
2. **learn**: training rows and the update (``StepRunner.learn``: the signal, then the
   updater). With nothing sampling meanwhile (``max_staleness: 0``) the engine sleeps through
   the update (vLLM on a shared GPU frees its memory; else a no-op).
3. **sync**: the new weights reach the engine (``StepRunner.sync``, which also wakes it).
   With streaming they reach it when the update ends (``partial_rollouts: true``: rollouts in
   flight carry on with the new weights from their next call) or once the running groups have
   finished (``false``: no rollout mixes two versions; new groups wait for the sync).
4. **advance**: the stream's bound moves on one batch; new groups start on the new weights.

The loss corrects for staleness (decoupled PPO: ``losses.ppo_clip_loss_BT`` with a behaviour
weight; with ``max_staleness: 0`` the weight is 1). Every step, in every mode, reports
``fully_async/*``: staleness, token share per version, dropped rollouts, the stream's
carried-over / running / replaced groups, and how long the engine (no group sampling) and the
trainer (no rows, update or sync running) sat idle during the step, both measured with clocks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from rltune.trainer.staleness import staleness_metrics
from rltune.trainer.step import StepResult, StepRunner
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

    @contextmanager
    def running(self) -> Iterator[None]:
        """``with clock.running():`` the block counts as busy time (also when it raises)."""
        self.start()
        try:
            yield
        finally:
            self.stop()

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
        hp, knobs = self.rt.hp, self.rt.knobs
        self.stream = GroupStream(
            steps, batch_size=hp.batch_size, n_rollouts=hp.n_rollouts,
            max_staleness=max_staleness, total_steps=total_steps,
            version=lambda: self.rt.engine.weight_version,
            dynamic_sampling=knobs.dynamic_sampling,
            max_sampling_rounds=knobs.max_sampling_rounds,
            on_start=self.engine_clock.start, on_stop=self.engine_clock.stop)

    async def run_step(self, step: int) -> StepResult:
        """Take the step's groups, learn from them, sync the weights, move the stream on."""
        t0 = time.perf_counter()
        engine0, trainer0 = self.engine_clock.busy(t0), self.trainer_clock.busy(t0)
        self.steps.memory.start()
        collected = await self.stream.take(step)  # the first batch_size groups to finish
        version = self.rt.engine.weight_version  # the policy's weights == the engine's now
        stale = staleness_metrics(collected.results, policy_version=version, dropped=0)
        stale.update(collected.metrics)
        with self.trainer_clock.running():
            # nothing samples during a synchronous step's update: the engine may sleep
            result = await self.steps.learn(collected, sleep_engine=self.max_staleness == 0)
        if result.updated:
            if not self.partial:  # whole rollouts on one version: drain before the sync
                await self.stream.drain()
            with self.trainer_clock.running():
                result.metrics["timing/s/sync"] = await self.steps.sync()
        self.stream.advance()  # new groups start on the new weights
        window = self.steps.finish(result, t0).metrics["timing/s/step"]
        t1 = t0 + window  # the idle times are shares of the step's own wall-clock time
        result.metrics.update(stale)
        result.metrics.update(idle_metrics(window, self.engine_clock.busy(t1) - engine0,
                                           self.trainer_clock.busy(t1) - trainer0))
        return result

    def data_order(self) -> dict[str, Any]:
        """The sampler state a resumed job continues from: the state before the oldest prompt
        batch that has a group not yet trained (``GroupStream.data_order``)."""
        return self.stream.data_order() or self.sampler.state_dict()

    async def close(self) -> None:
        """Cancel rollouts sampled ahead (a job that ends early or fails)."""
        await self.stream.close()
