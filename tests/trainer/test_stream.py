"""Streaming rollouts (``trainer/stream.py``): a step takes the first ``batch_size`` groups to
finish, the rest carry over, over-sampling is bounded by the weight version, groups staler than
``max_staleness`` are dropped, counted and replaced, and nothing is taken twice.

The group source here is a stand-in for ``StepRunner`` whose groups finish when the test says
so (one ``asyncio.Event`` per group) and whose tokens carry the engine version at the moment
they were "sampled", so every count below is computed by hand.
"""

from __future__ import annotations

import asyncio

import pytest

from rltune.config.data import DataRow, EpochSampler
from rltune.gateway.rows import TokenSequence
from rltune.rollout.results import RolloutResult
from rltune.trainer.stream import GroupStream


class Source:
    """Groups that finish on demand; a finished group's tokens carry ``version_at_finish``
    (``partial``) or the version when it started (whole rollouts)."""

    def __init__(self, n_rows: int, batch_size: int, partial: bool = False):
        self.train_rows = [DataRow(messages=[{"role": "user", "content": str(i)}])
                           for i in range(n_rows)]
        self.sampler = EpochSampler(n_rows, batch_size, seed=0)
        self.engine_version = 0
        self.partial = partial
        self.gates: dict[int, asyncio.Event] = {}
        self.started: list[int] = []  # sample_index (the stream's group number) per start
        self.scores: dict[int, list[float]] = {}

    async def run_group(self, row, row_index, step, sample_index, n):
        self.started.append(sample_index)
        gate = self.gates.setdefault(sample_index, asyncio.Event())
        first = self.engine_version
        await gate.wait()
        last = self.engine_version if self.partial else first
        scores = self.scores.get(sample_index, [float(k % 2) for k in range(n)])
        return [RolloutResult(f"g{sample_index}.r{k}", f"s{sample_index}", sample_index,
                              row_index, ok=True, score=scores[k],
                              sequences=[TokenSequence(input_ids=[1, 2, 3], loss_mask=[0, 1, 1],
                                                       token_versions=[-1, first, last])])
                for k in range(n)]

    def finish(self, *groups: int) -> None:
        for g in groups:
            self.gates.setdefault(g, asyncio.Event()).set()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def stream_for(src: Source, **kw) -> GroupStream:
    args = {"batch_size": 2, "n_rollouts": 2, "max_staleness": 1, "total_steps": 10,
            "version": lambda: src.engine_version, **kw}
    return GroupStream(src, **args)


def sync(src: Source, stream: GroupStream) -> None:
    """What the scheduler does after a step's update: new weights, then the bound moves on."""
    src.engine_version += 1
    stream.advance()


async def test_first_groups_to_finish_train_and_the_rest_carry_over():
    src = Source(n_rows=20, batch_size=2)
    stream = stream_for(src, max_staleness=1)
    stream.fill()
    await settle()
    assert src.started == [0, 1, 2, 3]  # (0 steps + 1 + 1) x 2: one batch over-sampled
    src.finish(3, 1)  # finishing order, not starting order
    taken = await stream.take(1)
    assert sorted({r.sample_index for r in taken.results}) == [1, 3]
    assert len(taken.results) == 4
    m = taken.metrics
    assert m["fully_async/stream/running_groups"] == 2.0  # 0 and 2 carry over
    assert m["fully_async/stream/carried_over_groups"] == 0.0
    await settle()
    assert src.started == [0, 1, 2, 3]  # the bound has not moved: no update reached the engine
    sync(src, stream)
    await settle()
    assert src.started == [0, 1, 2, 3, 4, 5]  # (1 + 1 + 1) x 2 = 6
    src.finish(0, 4)
    taken = await stream.take(2)
    assert sorted({r.sample_index for r in taken.results}) == [0, 4]
    m = taken.metrics
    assert m["fully_async/stream/carried_over_groups"] == 1.0  # group 0, started for step 1
    assert m["fully_async/stream/max_group_lag"] == 1.0
    assert m["fully_async/dropped_stale_rollouts"] == 0.0
    assert stream.data_order() is not None  # groups 2 and 5 are still owed
    assert await stream.close() == 2


async def test_a_group_staler_than_max_staleness_is_dropped_counted_and_replaced():
    """max_staleness 2: a long-tail group started at version 0 and finished when the policy is
    at version 3 is 3 versions old: dropped (its 2 rollouts counted) and replaced."""
    src = Source(n_rows=40, batch_size=2)
    stream = stream_for(src, max_staleness=2)
    stream.fill()
    await settle()
    assert src.started == list(range(6))  # (0 + 2 + 1) x 2
    seen: set[str] = set()
    for step, ready in ((1, (1, 2)), (2, (3, 4)), (3, (5, 6))):
        if step > 1:
            sync(src, stream)
            await settle()
        src.finish(*ready)
        taken = await stream.take(step)
        ids = {r.rollout_id for r in taken.results}
        assert not ids & seen  # nothing is taken twice
        seen |= ids
        assert taken.metrics["fully_async/dropped_stale_rollouts"] == 0.0
    # group 0 (version 0) is still running; the policy goes to version 3
    sync(src, stream)
    await settle()
    assert len(src.started) == (3 + 2 + 1) * 2
    src.finish(0)
    await settle()
    src.finish(7, 8)
    taken = await stream.take(4)
    m = taken.metrics
    assert m["fully_async/dropped_stale_rollouts"] == 2.0
    assert m["fully_async/stream/dropped_stale_groups"] == 1.0
    assert m["fully_async/stream/replaced_groups"] == 1.0
    assert sorted({r.sample_index for r in taken.results}) == [7, 8]
    await settle()
    assert len(src.started) == (3 + 2 + 1) * 2 + 1  # the dropped group's replacement
    await stream.close()


@pytest.mark.parametrize("max_staleness", [2, 4])
async def test_partial_rollouts_age_by_their_oldest_token(max_staleness):
    """A rollout that crossed updates is as old as its first token: kept at exactly
    max_staleness versions, dropped one beyond."""
    src = Source(n_rows=60, batch_size=1, partial=True)
    stream = stream_for(src, batch_size=1, max_staleness=max_staleness, total_steps=20)
    stream.fill()
    await settle()
    assert src.started == list(range(max_staleness + 1))
    for step in range(1, max_staleness + 1):  # groups 1..N train, group 0 keeps running
        src.finish(step)
        await stream.take(step)
        sync(src, stream)
        await settle()
    assert src.engine_version == max_staleness
    src.finish(0)
    taken = await stream.take(max_staleness + 1)
    assert {r.sample_index for r in taken.results} == {0}  # N versions old: kept
    assert taken.metrics["fully_async/stream/max_group_lag"] == max_staleness
    sync(src, stream)  # version N + 1
    await settle()
    src.finish(max_staleness + 2)  # started at version 2: N - 1 versions old
    taken = await stream.take(max_staleness + 2)
    assert {r.sample_index for r in taken.results} == {max_staleness + 2}
    sync(src, stream)  # version N + 2
    await settle()
    late = max_staleness + 1  # started at version 1: its first token is N + 1 versions old
    src.finish(late)
    await settle()
    src.finish(max_staleness + 3)
    taken = await stream.take(max_staleness + 3)
    assert {r.sample_index for r in taken.results} == {max_staleness + 3}
    assert taken.metrics["fully_async/dropped_stale_rollouts"] == 2.0
    assert taken.metrics["fully_async/stream/dropped_stale_groups"] == 1.0
    await stream.close()


async def test_over_sampling_stops_at_the_last_step():
    src = Source(n_rows=20, batch_size=2)
    stream = stream_for(src, max_staleness=4, total_steps=2)
    stream.fill()
    await settle()
    assert len(src.started) == 4  # min((0 + 4 + 1) x 2, 2 steps x 2)


async def test_dynamic_sampling_replaces_groups_without_signal():
    src = Source(n_rows=20, batch_size=2)
    src.scores = {0: [1.0, 1.0]}  # group 0 has no signal (every rollout scored the same)
    stream = stream_for(src, max_staleness=1, dynamic_sampling=True, max_sampling_rounds=2)
    stream.fill()
    await settle()
    src.finish(0, 1, 2)
    taken = await stream.take(1)
    assert sorted({r.sample_index for r in taken.results}) == [1, 2]
    assert taken.metrics["fully_async/stream/replaced_groups"] == 1.0
    await settle()
    assert len(src.started) == 5  # group 0's replacement
    await stream.close()


async def test_max_staleness_0_admits_one_batch_and_takes_it_whole():
    """Synchronous training is the stream's setting 0: one batch starts, the step takes it
    once it has finished, and the next batch starts only after the step's sync."""
    src = Source(n_rows=20, batch_size=2)
    stream = stream_for(src, max_staleness=0)
    take = asyncio.ensure_future(stream.take(1))
    await settle()
    assert src.started == [0, 1] and not take.done()
    src.finish(1)
    await settle()
    assert not take.done()  # the batch is not whole yet
    src.finish(0)
    taken = await take
    assert sorted({r.sample_index for r in taken.results}) == [0, 1]
    assert taken.metrics["fully_async/stream/running_groups"] == 0.0
    assert taken.rounds == 1
    await settle()
    assert src.started == [0, 1]  # nothing samples during the update
    sync(src, stream)
    await settle()
    assert src.started == [0, 1, 2, 3]
    await stream.close()


async def test_dynamic_sampling_refills_from_the_refill_stream_in_every_mode():
    """One refill rule for max_staleness 0 and N: a group without signal is replaced by a group
    on a refill prompt (``sample_extra``, the epoch order does not move), at most
    ``(max_sampling_rounds - 1) x batch_size`` a step; ``rounds`` is 1 + the replaced groups
    over batch_size, rounded up."""
    for staleness in (0, 2):
        src = Source(n_rows=20, batch_size=2)
        flat = [1.0, 1.0]
        src.scores = {0: flat, 1: flat, 2: flat, 3: flat} if staleness == 0 else {0: flat}
        stream = stream_for(src, max_staleness=staleness, dynamic_sampling=True,
                            max_sampling_rounds=2)
        stream.fill()
        await settle()
        epoch_order = src.sampler.state_dict()["position"]
        src.finish(*range(10))
        taken = await stream.take(1)
        m = taken.metrics
        if staleness == 0:
            # groups 0 and 1 are flat and replaced (2 = 1 x batch_size, the budget); the
            # replacements 2 and 3 are flat too but kept: out of rounds
            assert sorted({r.sample_index for r in taken.results}) == [2, 3]
            assert m["fully_async/stream/replaced_groups"] == 2.0 and taken.rounds == 2
        else:
            assert sorted({r.sample_index for r in taken.results}) == [1, 2]
            assert m["fully_async/stream/replaced_groups"] == 1.0 and taken.rounds == 2
        assert src.sampler.state_dict()["position"] == epoch_order  # refills drew no batch
        await stream.close()
