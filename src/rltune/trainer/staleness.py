"""Staleness accounting for the asynchronous pipeline (``trainer/scheduler.py``).

Every sampled token carries the engine weight version that sampled it
(``TokenSequence.token_versions``, recorded by the gateway). When a step updates, the policy
is at version ``policy_version``; a token's staleness is ``policy_version - version``, and a
rollout's is that of its oldest token (a partial rollout that crossed a weight update is as
stale as its first part). Rollouts staler than ``max_staleness`` are dropped before the signal
sees them, and counted. Each training row carries the mean age of its tokens
(``stamp_staleness``), from which ``scale_lr_by_staleness`` sizes the update's step.

Example:
    >>> from rltune.gateway.rows import TokenSequence
    >>> r = RolloutResult("r1", "s", 0, 0, ok=True, score=1.0, sequences=[
    ...     TokenSequence(input_ids=[1, 2, 3], loss_mask=[0, 1, 1], token_versions=[-1, 4, 5])])
    >>> rollout_staleness(r, policy_version=5)
    1
    >>> drop_stale([r], policy_version=6, max_staleness=1), r.ok
    (1, False)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Optional

from rltune.rollout.results import RolloutResult
from rltune.trainer.update import TrainingRow


def sampled_versions(r: RolloutResult) -> list[int]:
    """The weight version of each sampled token of ``r`` (all rows, in order)."""
    return [v for row in r.sequences for v in row.sampled_versions()]


def rollout_staleness(r: RolloutResult, policy_version: int) -> Optional[int]:
    """Versions between the policy now and the oldest token of ``r`` (None: no tokens)."""
    versions = sampled_versions(r)
    return policy_version - min(versions) if versions else None


def drop_stale(results: Sequence[RolloutResult], *, policy_version: int,
               max_staleness: int) -> int:
    """Mark every rollout staler than ``max_staleness`` as failed (it does not train and the
    step logs why); return how many were dropped."""
    dropped = 0
    for r in results:
        age = rollout_staleness(r, policy_version) if r.ok else None
        if age is not None and age > max_staleness:
            r.ok = False
            r.error = (f"dropped as stale: sampled {age} weight versions before the update "
                       f"(max_staleness {max_staleness})")
            dropped += 1
    return dropped


def staleness_metrics(results: Sequence[RolloutResult], *, policy_version: int,
                      dropped: int) -> dict[str, float]:
    """``fully_async/*``: the staleness distribution of the step's rollouts, the share of its
    sampled tokens per weight version (as staleness: ``token_share/staleness_0`` are tokens of
    the current weights), rollouts that span several versions, and the dropped count."""
    ages: list[int] = []
    tokens: Counter[int] = Counter()
    spanning = 0
    for r in results:
        versions = sampled_versions(r)
        if not versions:
            continue
        ages.append(policy_version - min(versions))
        tokens.update(policy_version - v for v in versions)
        spanning += len(set(versions)) > 1
    out = {"fully_async/dropped_stale_rollouts": float(dropped)}
    if ages:
        out["fully_async/staleness/mean"] = sum(ages) / len(ages)
        out["fully_async/staleness/max"] = float(max(ages))
        for age, n in sorted(Counter(ages).items()):
            out[f"fully_async/staleness/share_{age}"] = n / len(ages)
        out["fully_async/partial_rollout_share"] = spanning / len(ages)
    total = sum(tokens.values())
    for age, n in sorted(tokens.items()):
        out[f"fully_async/token_share/staleness_{age}"] = n / total
    return out


def stamp_staleness(rows: Sequence[TrainingRow], results: Sequence[RolloutResult], *,
                    policy_version: int) -> None:
    """Set each row's ``staleness``: the mean age, in weight versions, of the sampled tokens
    of its context (``RolloutResult.sequences[row.context]``) under ``policy_version``."""
    by_id = {r.rollout_id: r for r in results}
    for row in rows:
        r = by_id.get(row.rollout_id)
        if r is None or row.context >= len(r.sequences):
            continue
        versions = r.sequences[row.context].sampled_versions()
        if versions:
            row.staleness = sum(policy_version - v for v in versions) / len(versions)
