"""Turn the outputs of reward functions into one reward per rollout.

A component's score is ``Σ w·metric`` when it has ``reward_metric_weight``, else its
``reward_score``. A rollout's reward is ``Σ weight_f · score_f`` over all reward and group-reward
components. With no reward component, the rollout's own ``agent_output.reward_score`` is used.
Non-finite values are rejected: the rollout is dropped and counted, never trained on.

Example:
    >>> from rltune.sdk import Reward
    >>> component_score(Reward(reward_score=0.2, reward_metrics={"acc": 1.0, "fmt": 0.5}),
    ...                 {"acc": 0.8, "fmt": 0.4})
    1.0
    >>> combine_scores({"exact": 1.0, "style": 0.5}, {"exact": 1.0, "style": 0.2})
    1.1
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Optional

from rltune.sdk.data import AgentOutput, Reward
from rltune.sdk.errors import InvalidReward


class MissingRewardMetric(InvalidReward):
    """``reward_metric_weight`` names a metric the reward did not return: a mistake in the job
    config (or the reward), the same for every rollout, so the job stops with this one error
    instead of dropping every rollout (``Rewarder`` raises it as a ``ConfigError``)."""


def _finite(value: float, what: str) -> float:
    if value is None or not math.isfinite(float(value)):
        raise InvalidReward(f"{what} is {value!r}; rewards must be finite numbers")
    return float(value)


def component_score(reward: Reward, metric_weights: Optional[Mapping[str, float]] = None) -> float:
    """The score of one reward component for one rollout."""
    if not metric_weights:
        return _finite(reward.reward_score, "reward_score")
    metrics = reward.reward_metrics or {}
    missing = sorted(set(metric_weights) - set(metrics))
    if missing:
        raise MissingRewardMetric(
            f"reward_metric_weight names {missing} but the reward returned metrics "
            f"{sorted(metrics)}; return those metrics or fix reward_metric_weight"
        )
    return sum(w * _finite(metrics[m], f"reward_metrics[{m!r}]") for m, w in metric_weights.items())


def combine_scores(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Weighted sum of component scores (a missing weight counts as 1.0)."""
    total = sum(
        weights.get(name, 1.0) * _finite(s, f"score of {name}") for name, s in scores.items()
    )
    return round(total, 12)


def own_score(agent_output: Optional[AgentOutput]) -> Optional[float]:
    """The rollout's preset ``reward_score`` (used when no reward function is configured)."""
    if agent_output is None or agent_output.reward_score is None:
        return None
    return _finite(agent_output.reward_score, "agent_output.reward_score")
