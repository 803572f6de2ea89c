"""The seams of a training step (``trainer/step.py``), as protocols (no torch import).

* ``Signal`` turns a step's scored rollouts into training rows: ``GroupSignal`` (GRPO, GSPO,
  DAPO) and ``TeacherSignal`` (on-policy distillation) in ``trainer/signals.py``.
* ``Updater`` runs the policy update on those rows: ``PolicyUpdater`` (``trainer/update.py``)
  or, with several trainer ranks, ``RankedUpdater`` (``trainer/ranks.py``).
* ``StepRuntime`` is what the step reads from the started ``TrainingRuntime``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rltune.rollout.results import RolloutResult
from rltune.rollout.rewarder import Rewarder
from rltune.rollout.runner import RolloutRunner

if TYPE_CHECKING:
    from rltune.trainer.update import TrainingRow


class Updater(Protocol):
    """Updates the policy from training rows and reports the ``actor/*`` metrics."""

    async def aupdate(self, rows: Sequence[TrainingRow]) -> dict[str, float]: ...

    def compute_logprobs(self, rows: Sequence[TrainingRow]) -> list[list[float]]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Signal(Protocol):
    """The learning signal of a step, chosen by the job's advantage estimator."""

    #: the rollouts are scored by the reward functions before ``rows``
    scores_rollouts: bool
    #: progress-state key -> (metric, label) shown with the step's progress
    progress_fields: ClassVar[dict[str, tuple[str, str]]]

    def trains(self, r: RolloutResult) -> bool:
        """Whether this rollout can be learned from."""
        ...

    async def rows(self, results: list[RolloutResult]
                   ) -> tuple[list[TrainingRow], dict[str, float]]:
        """The training rows (one advantage per token) and the signal's metrics."""
        ...

    async def validation(self, results: list[RolloutResult]) -> dict[str, float]:
        """The signal's own validation metrics."""
        ...


class StepRuntime(Protocol):
    """The started resources a step uses (``trainer/runtime.py``'s ``TrainingRuntime``)."""

    hp: Any
    knobs: Any
    device: Any
    engine: Any
    runner: RolloutRunner
    rewarder: Rewarder
    updater: Updater

    def log(self, msg: str, level: str = "INFO") -> None: ...

    async def sync_weights(self) -> None: ...

