"""RankedUpdater (rltune.trainer.parallel.ranked) over the smallest transport: one rank, this
process, running the rank handlers every rank runs (``rank_worker.rank_commands``) on a real
updater. Each updater call is one RankCommand through the transport, in order, and the updater
behaves as the one-process updater it drives (metrics, weights, the step in its state). The local
and Ray transports themselves are in test_ranks.py and test_ray_ranks.py."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
import torch

from rltune.config import HyperParameters, resolve_algorithm
from rltune.trainer.parallel.rank_worker import RankCommand, rank_commands
from rltune.trainer.parallel.ranked import RankedUpdater
from rltune.trainer.protocols import Updater
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import PolicyUpdater, TrainingRow

T = TypeVar("T")
HP = HyperParameters(algorithm="grpo", learning_rate=1e-3, n_rollouts=2, batch_size=1)
ROWS = [TrainingRow([1, 2, 3], [0, 1, 1], 1.0, "a"), TrainingRow([1, 2, 4], [0, 1, 1], -1.0, "b")]


class OneRank:
    """A transport whose only rank is this process."""

    world_size = 1

    def __init__(self, updater: PolicyUpdater):
        self.model = updater.model
        self.commands = rank_commands(updater)  # a PolicyUpdater runs them as one rank
        self.calls: list[RankCommand] = []
        self.closed = False

    def call(self, command: RankCommand, argument: Any) -> Any:
        self.calls.append(command)
        return self.commands[command](argument)

    async def watch(self, work: Awaitable[T]) -> T:
        return await work

    async def close(self) -> None:
        self.closed = True


def _updater() -> PolicyUpdater:
    return PolicyUpdater(tiny_qwen2(seed=3), HP, resolve_algorithm(HP), total_steps=4)


async def test_each_call_is_one_command_on_the_ranks_and_acts_as_the_updater_it_drives():
    plain = _updater()
    want = plain.update(ROWS)
    one = OneRank(_updater())
    ranked: Updater = RankedUpdater(one, pad_token_id=0)
    got = await ranked.aupdate(ROWS)
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy"):
        assert got[key] == pytest.approx(want[key], rel=1e-6), key
    weights = await ranked.afull_weights()
    for name, w in plain.model.state_dict().items():
        torch.testing.assert_close(weights[name], w)
    assert len(ranked.compute_logprobs(ROWS)[0]) == 3
    state, schedule = ranked.state_dict(), ranked.schedule_state()
    assert state["step"] == schedule["step"] == 1

    again = RankedUpdater(OneRank(_updater()), pad_token_id=0)
    again.load_weights(weights)
    again.load_state_dict(state)
    again.load_schedule_state(schedule)
    assert again.step == 1
    await again.close()
    assert again.transport.closed
    C = RankCommand
    assert one.calls == [C.UPDATE, C.WEIGHTS, C.LOGPROBS, C.STATE, C.SCHEDULE]
    assert again.transport.calls == [C.LOAD_WEIGHTS, C.LOAD_STATE, C.LOAD_SCHEDULE]
    assert ranked.model is one.model and ranked.pad_token_id == 0
