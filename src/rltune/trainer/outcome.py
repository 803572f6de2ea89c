"""Whether a job trained: a step fails when none of its rollouts could be learned from, and
the job fails once more than ``max_failed_step_share`` of its steps failed.

A job whose rollouts all crash, hang or get NaN rewards must not end SUCCEEDED with the
untrained model as its checkpoint. The error names the most common failure and its count.

Example:
    >>> from collections import Counter
    >>> tally = FailedSteps(planned=2, max_share=0.5)
    >>> nan = Counter({"reward exact: reward_score is nan": 4})
    >>> tally.add(1, nan, rollouts=4)
    True
    >>> tally.add(2, nan, rollouts=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rltune.sdk.errors.TrainingFailedError: training: 2 of 2 steps had no successful rollout ...
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from rltune.sdk.data import FAILURE_ERROR_CODE
from rltune.sdk.errors import TrainingFailedError


class FailedSteps:
    """Counts failed steps of this run; ``add`` raises once the job cannot succeed."""

    def __init__(self, *, planned: int, max_share: float):
        self.planned, self.max_share = planned, max_share
        self.failed: list[int] = []
        self.reasons: Counter[str] = Counter()
        self.failed_rollouts = 0

    def add(self, step: int, failures: Counter[str], *, rollouts: int) -> bool:
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


class PluginFailures:
    """Ark's FAILURE semantics: a rollout whose Ark plugin (rollout or grader) still returned
    FAILURE, or raised, after its retries fails the job once there are more than ``limit`` of
    them (``max_plugin_failures``; None = never, such rollouts are only dropped).

    Example:
        >>> from rltune.rollout.results import RolloutResult
        >>> bad = RolloutResult("r1", "s", 0, 0, ok=False, error="failure: tool down",
        ...                     error_code="ark_failure")
        >>> PluginFailures(limit=None).add(1, [bad])
        >>> PluginFailures(limit=0).add(3, [bad])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rltune.sdk.errors.TrainingFailedError: training: step 3: 1 rollout ended with ...
    """

    def __init__(self, *, limit: Optional[int]):
        self.limit, self.count = limit, 0

    def add(self, step: int, results: list[Any]) -> None:
        failed = [r for r in results if r.error_code == FAILURE_ERROR_CODE]
        self.count += len(failed)
        if self.limit is None or self.count <= self.limit:
            return
        first = failed[0]
        why = (first.error or first.reward_error or "").splitlines()[0][:300]
        raise TrainingFailedError(
            f"step {step}: {len(failed)} rollout{'s' * (len(failed) != 1)} ended with a plugin "
            f"FAILURE after {first.attempts} attempt(s) ({self.count} in this job, more than "
            f"max_plugin_failures {self.limit}); first: {first.rollout_id}: {why}",
            where="training",
            hint="fix the plugin (its error is in train.log), return RETRY or DISCARD for "
            "failures to skip, or raise training.hyper_parameters.max_plugin_failures")
