"""OPD with a teacher **and** reward functions: both signals train.

The per-token advantage of a sampled token is the teacher term ``-(log pi_old - log
pi_teacher)`` plus ``opd_reward_weight`` × the rollout's GRPO advantage (its reward minus the
mean of its prompt's group, divided by the group's std unless ``norm_adv_by_std`` is off) —
the same for every token of the rollout. ``opd_reward_weight`` defaults to 1.0; 0 keeps the
rewards as metrics only. A rollout whose reward failed gets no reward term (the teacher term
still trains it). Without reward functions nothing is added: a rollout's own
``reward_score`` does not count in OPD (the cloud's "teacher + rollout" has no task reward).

Example:
    >>> from rltune.rollout.results import RolloutResult
    >>> rs = [RolloutResult(f"r{i}", "s", 0, 0, ok=True, score=float(i)) for i in range(2)]
    >>> {k: round(v, 3) for k, v in reward_advantages(rs, weight=0.5, norm_by_std=True).items()}
    {'r0': -0.354, 'r1': 0.354}
"""

from __future__ import annotations

import torch

from rltune.rollout.results import RolloutResult
from rltune.trainer.signals.advantages import group_advantages_B

DEFAULT_WEIGHT = 1.0


def reward_advantages(results: list[RolloutResult], *, weight: float,
                      norm_by_std: bool) -> dict[str, float]:
    """``{rollout_id: weight × group advantage}`` of the scored rollouts ({} when weight 0)."""
    scored = [r for r in results if r.usable]
    if not scored or weight == 0:
        return {}
    adv_B = group_advantages_B(torch.tensor([float(r.score) for r in scored]),  # type: ignore[arg-type]
                               torch.tensor([r.sample_index for r in scored]),
                               norm_by_std=norm_by_std)
    return {r.rollout_id: weight * a for r, a in zip(scored, adv_B.tolist(), strict=True)}
