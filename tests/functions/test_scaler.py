"""``scaler.decide``: the scaling policy as a pure function, against hand-worked snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from rltune.functions import failures as F
from rltune.functions.scaler import (
    Kill,
    PoolSnapshot,
    Probe,
    Reap,
    Retire,
    ScalePolicy,
    Start,
    WorkerState,
    decide,
    utilisation,
)

MB = 2**20
POLICY = ScalePolicy(concurrency=4, min_capacity=1, max_capacity=3, memory_size_mb=100,
                     concurrency_scale_threshold=0.8, memory_scale_threshold=0.9,
                     scale_in_cooldown=30.0, health_interval=5.0)
NOW = 1000.0


def worker(wid: str, **kw) -> WorkerState:
    # idle since NOW (not past the cooldown) and probed just now, unless a case says otherwise
    return WorkerState(wid, **{"idle_since": NOW, "last_probe": NOW, **kw})


def snap(*workers: WorkerState, policy: ScalePolicy = POLICY, **kw) -> PoolSnapshot:
    return PoolSnapshot(now=NOW, policy=policy, workers=workers, **kw)


def starts(actions) -> list[Start]:
    return [a for a in actions if isinstance(a, Start)]


def test_utilisation_counts_queued_calls_and_empty_pools():
    assert utilisation(6, 1, 2, 4) == 7 / 8
    assert utilisation(0, 0, 0, 4) == 0.0
    assert utilisation(0, 3, 0, 4) == float("inf")


def test_scale_out_on_the_concurrency_threshold():
    # 2 workers x 4 slots; 3 + 3 in flight + 1 queued = 7/8 = 0.875 >= 0.8
    actions = decide(snap(worker("a", in_flight=3, last_probe=NOW),
                          worker("b", in_flight=3, last_probe=NOW), queued=1))
    assert actions == [Start(1, "scale out: utilisation 0.88, memory 0.00", scale_out=True)]
    # 6/8 = 0.75 < 0.8: nothing to do (both busy, so no scale in either)
    assert decide(snap(worker("a", in_flight=3), worker("b", in_flight=3))) == []


def test_scale_out_on_the_memory_threshold():
    # 1 idle worker at 95 of 100 MB: mean RSS ratio 0.95 >= 0.9, utilisation 0
    actions = decide(snap(worker("a", rss_bytes=95 * MB)))
    assert actions == [Start(1, "scale out: utilisation 0.00, memory 0.95", scale_out=True)]
    # two workers at 95 and 70 MB: mean 0.825 < 0.9
    assert decide(snap(worker("a", rss_bytes=95 * MB), worker("b", rss_bytes=70 * MB))) == []


def test_never_above_max_capacity():
    busy = [worker(w, in_flight=4) for w in "abc"]  # 3 = max_capacity, utilisation 1.0
    assert starts(decide(snap(*busy, queued=10))) == []
    # 2 up + 1 starting is max_capacity too
    assert starts(decide(snap(*busy[:2], starting=1, queued=10))) == []


def test_never_below_min_capacity():
    policy = dataclasses.replace(POLICY, min_capacity=2)
    assert decide(snap(policy=policy)) == [Start(2, "min_capacity")]
    assert decide(snap(policy=policy, starting=1)) == [Start(1, "min_capacity")]
    # two idle long past the cooldown, but that is min_capacity: none retires
    idle = [worker(w, idle_since=NOW - 300) for w in "ab"]
    assert decide(snap(*idle, policy=policy)) == []


def test_scale_in_the_last_worker_idle_past_the_cooldown():
    workers = (worker("a", in_flight=1), worker("b", idle_since=NOW - 31),
               worker("c", idle_since=NOW - 40), worker("d", idle_since=NOW - 10))
    policy = dataclasses.replace(POLICY, max_capacity=4)
    # a is busy, d idle only 10 s of 30; b and c qualify and the last of them goes
    assert decide(snap(*workers, policy=policy)) == [Retire("c")]
    # one at a time, and not while calls wait for a slot
    assert decide(snap(*workers, policy=policy, queued=1)) == []
    # a worker that is not available (retiring) is not chosen
    gone = dataclasses.replace(workers[2], available=False)
    assert decide(snap(workers[0], workers[1], gone, workers[3], policy=policy)) == [Retire("b")]


def test_nothing_is_retired_before_the_cooldown():
    assert decide(snap(worker("a"), worker("b", idle_since=NOW - 29.9))) == []


def test_no_scale_out_while_a_worker_is_starting():
    hot = worker("a", in_flight=4)
    assert decide(snap(hot, starting=1, queued=5)) == []
    assert decide(snap(hot, queued=5)) == [
        Start(1, "scale out: utilisation 2.25, memory 0.00", scale_out=True)]


def test_an_exited_worker_is_reaped_and_its_replacement_counts_as_starting():
    actions = decide(snap(worker("a", in_flight=4), worker("b", alive=False), queued=5))
    # b's replacement is starting, so no scale out on top of it
    assert actions == [Reap("b")]


def test_a_worker_over_memory_size_is_killed_with_memory_exceeded():
    actions = decide(snap(worker("a", rss_bytes=150 * MB)))
    assert len(actions) == 1 and isinstance(actions[0], Kill)
    kill = actions[0]
    assert kill.worker_id == "a" and kill.code == F.MEMORY_EXCEEDED
    assert "RSS 150 MB exceeded memory_size 100 MB" in kill.reason
    # its replacement keeps min_capacity: no extra start


def test_busy_workers_are_probed_every_health_interval():
    actions = decide(snap(worker("a", in_flight=1, last_probe=NOW - 5),
                          worker("b", in_flight=1, last_probe=NOW - 4),
                          worker("c", in_flight=1, last_probe=NOW - 60, probing=True),
                          worker("d", in_flight=0, last_probe=NOW - 60)))
    assert [a for a in actions if isinstance(a, Probe)] == [Probe("a")]


def test_failing_setup_with_nobody_waiting_does_not_spin():
    policy = dataclasses.replace(POLICY, min_capacity=0)
    assert decide(snap(policy=policy, start_failing=True)) == []
    # someone waits: try again (utilisation is infinite with no slots)
    assert decide(snap(policy=policy, start_failing=True, queued=2)) == [
        Start(1, "scale out: utilisation inf, memory 0.00", scale_out=True)]


def test_decide_is_pure():
    s = snap(worker("a", in_flight=4), worker("b", alive=False), queued=3)
    assert decide(s) == decide(s)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.queued = 0  # type: ignore[misc]
