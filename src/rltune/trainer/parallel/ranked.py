"""The updater of a data-parallel job (several trainer ranks), over a transport to the ranks.

``RankedUpdater`` is what the training step sees when the policy is sharded over ranks: the
``Updater`` protocol (``trainer/protocols.py``), where every call that touches the sharded
model (update, log-probs, gathering or loading weights and optimizer state, sharded
checkpoints, the LR schedule) is one ``RankCommand`` given to every rank in the same order;
rank 0's answer is the call's. The ranks run the calls with ``RankServer``'s handlers
(``trainer/parallel/rank_worker.py``); their collectives keep them in step.

How a command reaches the ranks is the transport's (:class:`RankTransport`):

* ``LocalRanks`` (``trainer/parallel/ranks.py``): this process is rank 0, ranks 1..N-1 are local
  processes fed through their stdin pipes (``n_gpus_training`` > 1 on one machine);
* ``RayRanks`` (``trainer/parallel/ray_ranks.py``): every rank, 0 included, is a Ray actor placed on
  the cluster's nodes (``nnodes_training`` with a Ray cluster).

The updater counts the steps itself (the ranks step alike), so its state and schedule carry
the step whatever the transport.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, Generic, Optional, Protocol, TypeVar

import torch

from rltune.trainer.parallel.rank_worker import RankCommand
from rltune.trainer.update import TrainingRow

T = TypeVar("T")


class RankTransport(Protocol):
    """How rank 0's calls reach every trainer rank. Starting the ranks is the transport's
    own start function (``start_ranked_updater``, ``start_ray_ranked_updater``)."""

    @property
    def world_size(self) -> int: ...

    @property
    def model(self) -> Optional[torch.nn.Module]:
        """Rank 0's shard of the policy when rank 0 is this process, else None."""
        ...

    def call(self, command: RankCommand, argument: Any) -> Any:
        """Run ``command`` on every rank (in the order calls are made) and return rank 0's
        answer; a rank that fails or exits fails the call with an error naming it."""
        ...

    async def watch(self, work: Awaitable[T]) -> T:
        """Await ``work`` (a call run in a thread) while watching the ranks."""
        ...

    async def close(self) -> None:
        """Stop every rank and free what it held (processes, actors, reserved resources)."""
        ...


TransportT = TypeVar("TransportT", bound=RankTransport)


class RankedUpdater(Generic[TransportT]):
    """The ``Updater`` of a data-parallel job: each call is a ``RankCommand`` on every rank
    through ``transport`` (see the module doc)."""

    def __init__(self, transport: TransportT, pad_token_id: int = 0):
        self.transport = transport
        self.pad_token_id = pad_token_id
        self.step = 0
        self._lock = threading.Lock()  # one call at a time: every rank runs them in order

    @property
    def model(self) -> Optional[torch.nn.Module]:
        return self.transport.model

    @property
    def world_size(self) -> int:
        return self.transport.world_size

    def _everywhere(self, command: RankCommand, argument: Any = None) -> Any:
        with self._lock:
            return self.transport.call(command, argument)

    def update(self, rows: Sequence[TrainingRow]) -> dict[str, float]:
        metrics: dict[str, float] = self._everywhere(RankCommand.UPDATE, list(rows))
        self.step += 1
        return metrics

    async def aupdate(self, rows: Sequence[TrainingRow]) -> dict[str, float]:
        return await self.transport.watch(asyncio.to_thread(self.update, rows))

    def compute_logprobs(self, rows: Sequence[TrainingRow]) -> list[list[float]]:
        logprobs: list[list[float]] = self._everywhere(RankCommand.LOGPROBS, list(rows))
        return logprobs

    def full_weights(self) -> dict[str, torch.Tensor]:
        """The whole policy's weights (CPU tensors), gathered from every rank on rank 0."""
        weights: dict[str, torch.Tensor] = self._everywhere(RankCommand.WEIGHTS)
        return weights

    async def afull_weights(self) -> dict[str, torch.Tensor]:
        return await self.transport.watch(asyncio.to_thread(self.full_weights))

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self._everywhere(RankCommand.LOAD_WEIGHTS, weights)

    def state_dict(self) -> dict[str, Any]:
        """The one-process updater's state (full optimizer state gathered on rank 0)."""
        state: dict[str, Any] = self._everywhere(RankCommand.STATE)
        return {**state, "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._everywhere(RankCommand.LOAD_STATE, state)
        self.step = int(state["step"])

    def save_sharded(self, path: str | Path) -> None:
        """Every rank writes its DCP shards to ``path`` (``trainer/parallel/sharded.py``), a folder
        every rank reaches."""
        self._everywhere(RankCommand.SAVE_SHARDED, str(path))

    def load_sharded(self, path: str | Path) -> None:
        self._everywhere(RankCommand.LOAD_SHARDED, str(path))

    def schedule_state(self) -> dict[str, Any]:
        """The LR schedule (rank 0's; every rank steps alike) and the step."""
        schedule: dict[str, Any] = self._everywhere(RankCommand.SCHEDULE)
        return {**schedule, "step": self.step}

    def load_schedule_state(self, state: dict[str, Any]) -> None:
        self._everywhere(RankCommand.LOAD_SCHEDULE, state)
        self.step = int(state["step"])

    async def close(self) -> None:
        await self.transport.close()
