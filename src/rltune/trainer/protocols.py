"""The seams of a training step (``trainer/scheduler.py``, ``trainer/step.py``), as protocols.

* ``Signal`` turns a step's scored rollouts into training rows: ``GroupSignal`` (GRPO, GSPO,
  DAPO) and ``TeacherSignal`` (on-policy distillation) in ``trainer/signals/table.py``,
  ``CriticSignal`` (PPO) in ``trainer/signals/ppo.py``.
* ``Updater`` runs the policy update on those rows and moves the policy's weights:
  ``PolicyUpdater`` (``trainer/update.py``) or, with several trainer ranks, ``RankedUpdater``
  (``trainer/parallel/ranked.py``) over local rank processes (``trainer/parallel/ranks.py``)
  or Ray actors (``trainer/parallel/ray_ranks.py``).
* ``StepRuntime`` is what the step reads from the started ``TrainingRuntime``.

``mypy`` (strict, ``make test``) checks that each implementation fits its protocol.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Protocol

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.rollout.results import RolloutResult
from rltune.rollout.rewarder import Rewarder
from rltune.rollout.runner import RolloutRunner

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from rltune.engine.base import Engine
    from rltune.trainer.rows import SignalRows
    from rltune.trainer.update import TrainingRow

class Updater(Protocol):
    """Updates the policy from training rows (the ``actor/*`` metrics), computes its
    log-probs, and moves its weights and optimizer state."""

    @property
    def model(self) -> Optional[torch.nn.Module]:
        """The policy in this process (None: it lives on the ranks' actors only)."""
        ...

    @property
    def pad_token_id(self) -> int: ...

    async def aupdate(self, rows: Sequence[TrainingRow]) -> dict[str, float]: ...

    def update(self, rows: Sequence[TrainingRow]) -> dict[str, float]: ...

    def compute_logprobs(self, rows: Sequence[TrainingRow]) -> list[list[float]]: ...

    def full_weights(self) -> Any:
        """The whole policy's weights as ``Engine.update_weights`` takes them: a state dict
        (LoRA merged, gathered from every rank) or the policy model itself."""
        ...

    async def afull_weights(self) -> Any: ...

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def schedule_state(self) -> dict[str, Any]: ...

    def load_schedule_state(self, state: dict[str, Any]) -> None: ...

    def save_sharded(self, path: str | Path) -> None: ...

    def load_sharded(self, path: str | Path) -> None: ...

    async def close(self) -> None: ...


class Signal(Protocol):
    """The learning signal of a step, chosen by the job's advantage estimator."""

    #: the rollouts are scored by the reward functions before ``rows``
    scores_rollouts: bool
    #: progress-state key -> (metric, label) shown with the step's progress
    progress_fields: ClassVar[dict[str, tuple[str, str]]]
    #: why the last ``rows`` returned no rows although rollouts carried a signal (PPO's
    #: critic warm-up), logged instead of a warning; None: no such reason
    no_rows_reason: Optional[str]

    @property
    def critic(self) -> Optional[Stateful]:
        """State a checkpoint keeps next to the policy's (PPO's critic, ``critic.pt``)."""
        ...

    def trains(self, r: RolloutResult) -> bool:
        """Whether this rollout can be learned from."""
        ...

    async def rows(self, results: list[RolloutResult]) -> SignalRows:
        """The training rows (one advantage per token), the signal's metrics and its notes on
        each rollout (``trainer/rows.py``); the rollouts are only read."""
        ...

    async def validation(self, results: list[RolloutResult]) -> dict[str, float]:
        """The signal's own validation metrics."""
        ...


class Stateful(Protocol):
    """Something a checkpoint saves and restores."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class StepRuntime(Protocol):
    """The started resources a step uses (``trainer/runtime.py``'s ``TrainingRuntime``)."""

    @property
    def hp(self) -> HyperParameters: ...
    @property
    def knobs(self) -> AlgorithmKnobs: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def runner(self) -> RolloutRunner: ...
    @property
    def val_runner(self) -> RolloutRunner:
        """Validation's runner: the training sampling, or ``val_temperature``'s."""
        ...
    @property
    def rewarder(self) -> Rewarder: ...
    @property
    def updater(self) -> Updater: ...

    def log(self, msg: str, level: str = "INFO") -> None: ...

    async def sync_weights(self) -> None: ...
