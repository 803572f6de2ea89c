"""The pool's scaling policy as a pure function: ``decide(snapshot) -> actions``.

The pool (``rltune.functions.pool``) takes a :class:`PoolSnapshot` every ``scale_interval``
seconds, calls :func:`decide` and applies the actions itself. Nothing here touches a worker, a
clock or the pool; every fact (liveness, RSS, in-flight calls, timestamps) comes in the snapshot.

The rules, in order:

- a worker that exited is reaped and replaced (:class:`Reap`; its in-flight calls are retried
  by ``pool.call``);
- a worker whose RSS exceeds ``memory_size`` MB is killed and replaced (:class:`Kill` with
  ``error_code="memory_exceeded"``), as is one running more than ``max_processes`` processes
  (``error_code="processes_exceeded"``; a fork bomb);
- a busy worker whose last ``/health`` probe is ``health_interval`` s old is probed again
  (:class:`Probe`; the pool kills one that does not answer in ``hang_timeout`` s);
- below ``min_capacity`` (workers + starting, counting replacements), start the missing ones;
- when setup keeps failing, no worker is up or starting and nobody waits: do nothing more;
- scale out by one worker (below ``max_capacity``, none starting) when (in flight + queued) /
  (workers × concurrency) ≥ ``concurrency_scale_threshold`` or mean RSS / ``memory_size`` ≥
  ``memory_scale_threshold`` (:class:`Start` with ``scale_out=True``);
- otherwise scale in by one worker (above ``min_capacity``, nothing queued) that has been idle
  ``scale_in_cooldown`` s (:class:`Retire`, the last such worker).

Example:
    >>> policy = ScalePolicy(concurrency=2, min_capacity=1, max_capacity=3, memory_size_mb=100,
    ...                      concurrency_scale_threshold=0.8, memory_scale_threshold=0.9,
    ...                      scale_in_cooldown=30, health_interval=5)
    >>> busy = WorkerState("w1", in_flight=2, last_probe=9.0)
    >>> decide(PoolSnapshot(now=10.0, policy=policy, workers=(busy,)))
    [Start(count=1, reason='scale out: utilisation 1.00, memory 0.00', scale_out=True)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from rltune.functions import failures as F

_MB = 2**20


@dataclass(frozen=True)
class ScalePolicy:
    """The runtime knobs ``decide`` reads (from ``FunctionComponentRuntime`` and the spec)."""

    concurrency: int
    min_capacity: int
    max_capacity: int
    memory_size_mb: int
    concurrency_scale_threshold: float
    memory_scale_threshold: float
    scale_in_cooldown: float
    health_interval: float
    max_processes: int = 0  # processes of one worker (it and all it started); 0: no limit


@dataclass(frozen=True)
class WorkerState:
    """One worker as the pool sees it at snapshot time (timestamps are ``time.monotonic``)."""

    worker_id: str
    alive: bool = True
    rss_bytes: int = 0
    processes: int = 0  # the worker and its descendants (0: not known)
    in_flight: int = 0
    available: bool = True
    idle_since: float = 0.0
    last_probe: float = 0.0
    probing: bool = False


@dataclass(frozen=True)
class PoolSnapshot:
    """Everything ``decide`` needs: the workers, what is starting and waiting, the policy."""

    now: float
    policy: ScalePolicy
    workers: tuple[WorkerState, ...] = ()
    starting: int = 0
    queued: int = 0
    #: the last worker start failed (and no start succeeded since)
    start_failing: bool = False


@dataclass(frozen=True)
class Reap:
    """The worker exited: record how, take it out and start a replacement."""

    worker_id: str


@dataclass(frozen=True)
class Kill:
    """Kill the worker, fail its calls with ``code`` once retries are spent, replace it."""

    worker_id: str
    reason: str
    code: str
    rss_bytes: int = 0  # what was measured, for a memory kill
    idle: bool = False  # it had no call in flight: its baseline alone was too big


@dataclass(frozen=True)
class Probe:
    """Ask the busy worker's ``/health``; kill it as hung if it does not answer in time."""

    worker_id: str


@dataclass(frozen=True)
class Start:
    """Start ``count`` more workers in the background."""

    count: int
    reason: str
    scale_out: bool = False


@dataclass(frozen=True)
class Retire:
    """Stop the idle worker (no new calls go to it; it has none in flight)."""

    worker_id: str


Action = Union[Reap, Kill, Probe, Start, Retire]


def utilisation(in_flight: int, queued: int, workers: int, concurrency: int) -> float:
    """Demand over slots: (in flight + queued) / (workers × concurrency); inf with no slots."""
    slots = workers * concurrency
    demand = in_flight + queued
    if slots == 0:
        return float("inf") if demand else 0.0
    return demand / slots


def decide(snap: PoolSnapshot) -> list[Action]:
    """The actions the pool should take now (see the module docstring for the rules)."""
    p = snap.policy
    limit = p.memory_size_mb * _MB
    actions: list[Action] = []
    live: list[WorkerState] = []
    rss_total = 0
    for w in snap.workers:
        if not w.alive:
            actions.append(Reap(w.worker_id))
            continue
        if w.rss_bytes > limit:
            actions.append(Kill(
                w.worker_id, f"was killed: RSS {w.rss_bytes / _MB:.0f} MB exceeded memory_size "
                             f"{p.memory_size_mb} MB (raise runtime.memory_size or use less "
                             "memory)", F.MEMORY_EXCEEDED, w.rss_bytes, w.in_flight == 0))
            continue
        if p.max_processes and w.processes > p.max_processes:
            actions.append(Kill(
                w.worker_id, f"was killed: it ran {w.processes} processes, more than the limit "
                             f"of {p.max_processes} (RLTUNE_WORKER_MAX_PROCESSES; start fewer "
                             "subprocesses)", F.PROCESSES_EXCEEDED))
            continue
        rss_total += w.rss_bytes
        live.append(w)
        if not w.probing and w.in_flight > 0 and snap.now - w.last_probe >= p.health_interval:
            actions.append(Probe(w.worker_id))
    n = len(live)
    starting = snap.starting + (len(snap.workers) - n)  # every reaped or killed one is replaced
    planned = n + starting
    if planned < p.min_capacity:
        return [*actions, Start(p.min_capacity - planned, "min_capacity")]
    if snap.start_failing and starting == 0 and n == 0 and snap.queued == 0:
        return actions  # setup keeps failing and nobody is waiting: don't spin restarting it
    util = utilisation(sum(w.in_flight for w in live), snap.queued, n, p.concurrency)
    mem_ratio = rss_total / (n * limit) if n else 0.0
    if planned < p.max_capacity and starting == 0 and (
        util >= p.concurrency_scale_threshold or mem_ratio >= p.memory_scale_threshold
    ):
        return [*actions, Start(1, f"scale out: utilisation {util:.2f}, memory {mem_ratio:.2f}",
                                scale_out=True)]
    if n > p.min_capacity and snap.queued == 0:
        idle = [w for w in live if w.in_flight == 0 and w.available
                and snap.now - w.idle_since >= p.scale_in_cooldown]
        if idle:
            actions.append(Retire(idle[-1].worker_id))
    return actions
