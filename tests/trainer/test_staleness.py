"""Staleness accounting of the asynchronous pipeline: per-token versions → rollout staleness,
dropping, and the fully_async/* metrics."""

from __future__ import annotations

import pytest

from rltune.gateway.rows import TokenSequence
from rltune.rollout.results import RolloutResult
from rltune.trainer.scheduler import BusyClock, idle_metrics
from rltune.trainer.staleness import (
    drop_stale,
    rollout_staleness,
    staleness_metrics,
    stamp_staleness,
)


def rollout(rid: str, *versions_per_row: list[int]) -> RolloutResult:
    rows = [TokenSequence(input_ids=list(range(len(vs) + 1)), loss_mask=[0] + [1] * len(vs),
                token_versions=[-1, *vs]) for vs in versions_per_row]
    return RolloutResult(rid, "s", 0, 0, ok=True, score=1.0, sequences=rows)


def test_a_rollout_is_as_stale_as_its_oldest_token():
    partial = rollout("p", [3, 3], [4, 4, 4])  # crossed the update 3 -> 4 between two calls
    assert rollout_staleness(partial, policy_version=4) == 1
    assert rollout_staleness(rollout("f", [4]), policy_version=4) == 0
    assert rollout_staleness(RolloutResult("x", "s", 0, 0, ok=False), policy_version=4) is None


def test_staler_than_max_staleness_is_dropped_and_counted():
    fresh, one, two = rollout("a", [5, 5]), rollout("b", [4, 5]), rollout("c", [3])
    failed = RolloutResult("d", "s", 0, 0, ok=False, error="boom")
    results = [fresh, one, two, failed]
    assert drop_stale(results, policy_version=5, max_staleness=1) == 1
    assert (fresh.ok, one.ok, two.ok) == (True, True, False)
    assert "2 weight versions" in two.error and "max_staleness 1" in two.error
    assert failed.error == "boom"  # a failed rollout is not counted again
    assert drop_stale([rollout("e", [3])], policy_version=5, max_staleness=2) == 0


def test_fully_async_metrics_hand_counted():
    results = [rollout("a", [5, 5]), rollout("b", [4], [5, 5, 5]), rollout("c", [4, 4, 4]),
               RolloutResult("x", "s", 0, 0, ok=False)]
    m = staleness_metrics(results, policy_version=5, dropped=2)
    assert m["fully_async/dropped_stale_rollouts"] == 2.0
    # rollout staleness 0, 1, 1
    assert m["fully_async/staleness/mean"] == pytest.approx(2 / 3)
    assert m["fully_async/staleness/max"] == 1.0
    assert m["fully_async/staleness/share_0"] == pytest.approx(1 / 3)
    assert m["fully_async/staleness/share_1"] == pytest.approx(2 / 3)
    # tokens: 5 of version 5 (staleness 0), 4 of version 4 (staleness 1)
    assert m["fully_async/token_share/staleness_0"] == pytest.approx(5 / 9)
    assert m["fully_async/token_share/staleness_1"] == pytest.approx(4 / 9)
    assert m["fully_async/partial_rollout_share"] == pytest.approx(1 / 3)  # only "b"


def test_idle_shares_and_the_busy_clock():
    m = idle_metrics(10.0, engine_busy_s=8.0, trainer_busy_s=3.0)
    assert m["fully_async/idle/engine_s"] == pytest.approx(2.0)
    assert m["fully_async/idle/trainer_share"] == pytest.approx(0.7)
    clock = BusyClock()
    assert clock.busy() == 0.0
    clock.start()
    clock.start()  # two overlapping tasks count once
    clock.stop()
    assert clock.active == 1 and clock.busy() >= 0.0
    clock.stop()
    frozen = clock.busy()
    assert clock.busy() == frozen  # nothing runs: the busy time stops growing


def test_each_row_is_stamped_with_its_tokens_mean_age():
    from rltune.trainer.update import TrainingRow

    results = [rollout("a", [5, 5]), rollout("b", [3], [4, 5, 5])]
    rows = [TrainingRow(s.input_ids, s.loss_mask, 0.0, r.rollout_id, context=i)
            for r in results for i, s in enumerate(r.sequences)]
    stamp_staleness(rows, results, policy_version=5)
    assert [(r.rollout_id, r.context, r.staleness) for r in rows] == [
        ("a", 0, 0.0), ("b", 0, 2.0), ("b", 1, pytest.approx(1 / 3))]
