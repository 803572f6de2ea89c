"""The group stream: the one collector of training rollouts (``trainer/scheduler.py``).

``GroupStream`` keeps prompt groups sampling continuously; a step takes the **first**
``batch_size`` groups that finish (``take``), and groups still running carry over to the next
step. Over-sampling is bounded by the weight version, as in AReaL: a new group may start only
while

    groups started  <  (steps done + max_staleness + 1) x batch_size

(a step is done once its new weights are in the engine)

so a group never starts more than ``max_staleness`` versions behind the policy that will train
on it, and at most ``(max_staleness + 1) x batch_size`` groups are owned (running or finished,
not yet taken) at any time. ``max_staleness: 0`` is synchronous training: exactly one batch
starts per step, and the step takes it whole once it has finished. The engine's and the
tools' concurrency is the limit, not the step boundary.

One refill rule: a group that finishes too late (its oldest token more than ``max_staleness``
versions behind the policy when a step takes it: a long-tail episode) is dropped, counted, and
replaced by a fresh group; with ``partial_rollouts`` the staleness is per rollout (a rollout
that crossed an update is as stale as its first token). DAPO's dynamic sampling drops and
replaces groups without signal, up to ``(max_sampling_rounds - 1) x batch_size`` replacements
a step; after that a group is kept whatever its rewards. A replacement takes the dropped
group's place under the bound and its prompt comes from the sampler's refill stream
(``EpochSampler.sample_extra``), so refills never move the epoch order. The step's
``rounds`` (``train/sampling_rounds``) is ``1 + ceil(groups replaced for lack of signal /
batch_size)``: 1 without dynamic sampling or when no group lacked signal, at most
``max_sampling_rounds``.

``partial_rollouts: false``: no rollout may mix two weight versions, so before each weight
sync ``drain`` stops new groups and waits for the running ones (they are kept for the next
steps); ``advance`` starts groups again once the new weights are in.

Every taken batch reports ``fully_async/stream/*``: groups carried over from earlier steps,
groups still running and finished-but-not-taken at the moment the step took its batch, stale
groups dropped and replacements started. Nothing is taken twice: a group leaves the stream
when a step takes or drops it.

Example (see tests/trainer/test_stream.py)::

    stream = GroupStream(steps, batch_size=8, n_rollouts=8, max_staleness=2,
                         total_steps=20, version=lambda: engine.weight_version)
    collected = await stream.take(step=1)   # the first 8 groups to finish
    ...update...; await stream.drain(); sync; stream.advance()
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from rltune.config.data import DataRow, EpochSampler
from rltune.rollout.results import RolloutResult, has_signal
from rltune.trainer.staleness import drop_stale


class GroupSource(Protocol):
    """What the stream needs of ``StepRunner``: the prompts, their sampler and ``run_group``."""

    train_rows: list[DataRow]
    sampler: EpochSampler

    async def run_group(self, row: DataRow, row_index: int, step: int, sample_index: int,
                        n: int) -> list[RolloutResult]: ...


@dataclass
class Collected:
    """One step's collected batch: its scored rollouts, the sampling rounds it took, how long
    the step waited for it, and the stream's ``fully_async/*`` metrics of the batch."""

    step: int
    results: list[RolloutResult]
    rounds: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class _Group:
    seq: int  # the stream's running group number
    row_index: int
    step: int  # the next step to train when the group started
    version: int  # engine weight version when it started
    results: Optional[list[RolloutResult]] = None
    error: Optional[BaseException] = None


class GroupStream:
    """Groups in flight across steps; see the module docstring for the rules."""

    def __init__(self, source: GroupSource, *, batch_size: int, n_rollouts: int,
                 max_staleness: int, total_steps: int, version: Callable[[], int],
                 dynamic_sampling: bool = False, max_sampling_rounds: int = 1,
                 on_start: Callable[[], None] = lambda: None,
                 on_stop: Callable[[], None] = lambda: None):
        self.source, self.bs, self.n = source, batch_size, n_rollouts
        self.max_staleness, self.total_steps = max_staleness, total_steps
        self.version = version
        self.dynamic, self.max_rounds = dynamic_sampling, max(1, max_sampling_rounds)
        self.on_start, self.on_stop = on_start, on_stop
        self.started = 0  # groups started that count toward the bound (replaced ones don't)
        self.seq = 0  # every group ever started
        self.advanced = 0  # steps whose update (if any) reached the engine
        self.running: dict[asyncio.Task[list[RolloutResult]], _Group] = {}
        self.ready: deque[_Group] = deque()  # finished, in finishing order
        self.paused = False
        self._prompts: deque[int] = deque()
        self._orders: deque[tuple[int, dict[str, Any]]] = deque()  # (first seq, sampler state)
        self._wake = asyncio.Event()
        self.step = 1

    # ------------------------------------------------------------------ the bound

    def allowed(self) -> int:
        """How many groups may have started (AReaL's rule, capped by the job's last step)."""
        return min((self.advanced + self.max_staleness + 1) * self.bs,
                   self.total_steps * self.bs)

    def fill(self) -> int:
        """Start groups up to the bound (none while paused); returns how many started."""
        started = 0
        while not self.paused and self.started < self.allowed():
            self._start_one()
            started += 1
        return started

    def _start_one(self) -> None:
        if not self._prompts:
            self._orders.append((self.seq, self.source.sampler.state_dict()))
            self._prompts.extend(self.source.sampler.next_batch())
        self._launch(self._prompts.popleft())

    def _launch(self, row_index: int) -> None:
        g = _Group(self.seq, row_index, self.step, self.version())
        self.seq += 1
        self.started += 1
        row = self.source.train_rows[row_index]
        task = asyncio.create_task(
            self.source.run_group(row, row_index, g.step, g.seq, self.n),
            name=f"rltune-group-{g.seq}")
        self.running[task] = g
        self.on_start()
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[list[RolloutResult]]) -> None:
        g = self.running.pop(task, None)
        self.on_stop()
        if g is None or task.cancelled():
            return
        if task.exception() is not None:
            g.error = task.exception()
        else:
            g.results = task.result()
        self.ready.append(g)
        self._wake.set()

    # ------------------------------------------------------------------ a step's batch

    async def take(self, step: int) -> Collected:
        """The first ``batch_size`` usable groups to finish; the rest carry over."""
        t0 = time.perf_counter()
        self.step = step
        policy = self.version()
        kept: list[_Group] = []
        dropped_rollouts = dropped_groups = replaced = flat = 0
        while len(kept) < self.bs:
            self.fill()
            if not self.ready:
                if not self.running:
                    raise RuntimeError("the group stream has nothing running and nothing "
                                       "finished (no prompts left?)")
                self._wake.clear()
                await self._wake.wait()
                continue
            g = self.ready.popleft()
            if g.error is not None:
                raise g.error
            results = g.results or []
            dropped = drop_stale(results, policy_version=policy,
                                 max_staleness=self.max_staleness)
            dropped_rollouts += dropped
            if dropped and not any(r.ok for r in results):  # the whole group is too old
                dropped_groups += 1
                self._replace(g)
                replaced += 1
                continue
            if self.dynamic and not has_signal(results) \
                    and flat < (self.max_rounds - 1) * self.bs:
                flat += 1
                self._replace(g)
                replaced += 1
                continue
            kept.append(g)
        self.step = step + 1
        carried = sum(g.step < step for g in kept)
        metrics = {
            "fully_async/dropped_stale_rollouts": float(dropped_rollouts),
            "fully_async/stream/dropped_stale_groups": float(dropped_groups),
            "fully_async/stream/replaced_groups": float(replaced),
            "fully_async/stream/carried_over_groups": float(carried),
            "fully_async/stream/running_groups": float(len(self.running)),
            "fully_async/stream/ready_groups": float(len(self.ready)),
            "fully_async/stream/started_groups": float(self.seq),
            "fully_async/stream/max_group_lag": float(max(policy - g.version for g in kept)),
        }
        return Collected(step, [r for g in kept for r in (g.results or [])],
                         rounds=1 + math.ceil(flat / self.bs),
                         seconds=time.perf_counter() - t0, metrics=metrics)

    def _replace(self, g: _Group) -> None:
        """A fresh group takes the dropped one's place under the bound, on a refill prompt."""
        self.started -= 1
        self._launch(self.source.sampler.sample_extra(1)[0])

    # ------------------------------------------------------------------ weight syncs

    async def drain(self) -> None:
        """Stop starting groups and wait for the running ones (``partial_rollouts: false``:
        the weights change only once no rollout is sampling)."""
        self.paused = True
        while self.running:
            await asyncio.wait(list(self.running))

    def advance(self) -> None:
        """A step is done (its new weights, if any, are in the engine): the bound moves one
        batch on and groups start again."""
        self.paused = False
        self.advanced += 1
        self.fill()

    # ------------------------------------------------------------------ resume / close

    def data_order(self) -> Optional[dict[str, Any]]:
        """The sampler state before the oldest prompt batch that still has a group not taken
        (a resumed job draws it again: those prompts may train twice, none is skipped); None
        when every drawn prompt was taken (the sampler's own state is exact)."""
        pending = [g.seq for g in self.running.values()] + [g.seq for g in self.ready]
        if self._prompts:  # drawn, not started yet: they belong to the newest batch
            pending.append(self.seq)
        if not pending:
            self._orders.clear()
            return None
        oldest = min(pending)
        while len(self._orders) > 1 and self._orders[1][0] <= oldest:
            self._orders.popleft()
        return self._orders[0][1] if self._orders else None

    async def close(self) -> int:
        """Cancel the groups still running (a job that ends or fails); returns how many."""
        tasks = list(self.running)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.running.clear()
        return len(tasks)
