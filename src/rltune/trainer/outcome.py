"""Whether a job trained: a step fails when none of its rollouts could be learned from, and
the job fails once more than ``max_failed_step_share`` of its steps failed.

A job whose rollouts all crash, hang or get NaN rewards must not end SUCCEEDED with the
untrained model as its checkpoint. The error names the most common failure and its count.

Example:
    >>> from collections import Counter
    >>> tally = FailedSteps(planned=2, max_share=0.5)
    >>> nan = Counter({"reward exact: reward_score is nan": 4})
    >>> tally.add(1, nan, rollouts=4)
    >>> tally.add(2, nan, rollouts=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rltune.sdk.errors.TrainingFailedError: training: 2 of 2 steps had no successful rollout ...
"""

from __future__ import annotations

from collections import Counter

from rltune.sdk.errors import TrainingFailedError


class FailedSteps:
    """Counts failed steps of this run; ``add`` raises once the job cannot succeed."""

    def __init__(self, *, planned: int, max_share: float):
        self.planned, self.max_share = planned, max_share
        self.failed: list[int] = []
        self.reasons: Counter = Counter()
        self.failed_rollouts = 0

    def add(self, step: int, failures: Counter, *, rollouts: int) -> bool:
        """Record step ``step``; it failed (True) when all its ``rollouts`` are in
        ``failures``."""
        if rollouts == 0 or sum(failures.values()) < rollouts:
            return False
        self.failed.append(step)
        self.reasons.update(failures)
        self.failed_rollouts += rollouts
        if len(self.failed) > self.max_share * self.planned:
            raise self.error()
        return True

    def error(self) -> TrainingFailedError:
        reason, count = self.reasons.most_common(1)[0]
        steps = ", ".join(str(s) for s in self.failed[:10]) + (
            ", ..." if len(self.failed) > 10 else "")
        return TrainingFailedError(
            f"{len(self.failed)} of {self.planned} steps had no successful rollout (steps "
            f"{steps}; more than max_failed_step_share {self.max_share:g}); most common "
            f"failure ({count} of {self.failed_rollouts} rollouts): {reason}",
            where="training",
            hint="fix that failure (train.log and the steps' trajectories show each one), or "
            "raise training.hyper_parameters.max_failed_step_share",
        )
