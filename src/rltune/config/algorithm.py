"""Algorithm presets (DESIGN.md §6): each is a set of knob values over one PPO-clip core.

Every knob is also a hyper-parameter of its own; a knob set explicitly wins over the preset.
This module is pure (no torch) so the server and CLI can show the resolved values.

Example:
    >>> from rltune.config import HyperParameters, resolve_algorithm
    >>> k = resolve_algorithm(HyperParameters(algorithm="dapo", n_rollouts=4))
    >>> k.clip_ratio_low, k.clip_ratio_high, k.loss_agg_mode, k.use_kl_loss
    (0.2, 0.28, 'token-mean', False)
    >>> resolve_algorithm(HyperParameters(algorithm="gspo", clip_ratio_high=1e-3)).clip_ratio_high
    0.001
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from rltune.config.hyperparams import HyperParameters

AlgorithmName = Literal["gspo", "grpo", "dapo", "opd"]
ImportanceLevel = Literal["token", "sequence"]
LossAggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean"]
KLEstimator = Literal["k1", "k2", "k3"]
AdvantageEstimator = Literal["grpo", "opd"]


class AlgorithmKnobs(BaseModel):
    """The resolved knobs the loss and the step loop read. Build with ``resolve_algorithm``."""

    model_config = ConfigDict(frozen=True)

    algorithm: AlgorithmName
    importance_sampling_level: ImportanceLevel
    #: None disables clipping (OPD: on-policy, the ratio is 1 by construction).
    clip_ratio_low: Optional[float]
    clip_ratio_high: Optional[float]
    #: Dual-clip bound for negative advantages (None = off).
    clip_ratio_c: Optional[float]
    loss_agg_mode: LossAggMode
    use_kl_loss: bool
    kl_loss_coef: float
    kl_estimator: KLEstimator
    advantage_estimator: AdvantageEstimator
    norm_adv_by_std: bool
    dynamic_sampling: bool
    max_sampling_rounds: int
    overlong_buffer_len: int
    overlong_penalty_factor: float
    entropy_coeff: float
    ppo_epochs: int


#: Knob values of each preset; anything not listed falls back to ``_COMMON``.
PRESETS: dict[str, dict[str, object]] = {
    "grpo": {
        "importance_sampling_level": "token",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "loss_agg_mode": "seq-mean-token-mean",
        "use_kl_loss": True,
        "kl_estimator": "k3",
    },
    "gspo": {
        # GSPO paper: sequence ratios sit very close to 1, hence the tiny clip range.
        "importance_sampling_level": "sequence",
        "clip_ratio_low": 3e-4,
        "clip_ratio_high": 4e-4,
        "loss_agg_mode": "seq-mean",
        "use_kl_loss": True,
        "kl_estimator": "k3",
    },
    "dapo": {
        "importance_sampling_level": "token",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
        "kl_estimator": "k3",
        "dynamic_sampling": True,
        # The paper uses 4096 of 20480 tokens; scaled down, a quarter of the response budget.
        "overlong_buffer_len": -1,
        "overlong_penalty_factor": 1.0,
    },
    "opd": {
        "importance_sampling_level": "token",
        "clip_ratio_low": None,
        "clip_ratio_high": None,
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
        "kl_estimator": "k3",
        "advantage_estimator": "opd",
    },
}

_COMMON: dict[str, object] = {
    "clip_ratio_c": None,
    "advantage_estimator": "grpo",
    "norm_adv_by_std": True,
    "dynamic_sampling": False,
    "max_sampling_rounds": 3,
    "overlong_buffer_len": 0,
    "overlong_penalty_factor": 0.0,
    "entropy_coeff": 0.0,
    "ppo_epochs": 1,
}

#: The knob names a user may set alone (hyper-parameters of the same name).
KNOB_NAMES = tuple(k for k in AlgorithmKnobs.model_fields if k not in ("algorithm", "kl_loss_coef"))


def resolve_algorithm(hp: HyperParameters, training_type: str = "reinforcement") -> AlgorithmKnobs:
    """Merge the preset of ``hp.algorithm`` (``opd`` when ``training_type`` is ``pg_opd``)
    with the knobs set explicitly in ``hp``."""
    kind = getattr(training_type, "value", training_type)
    name = "opd" if kind == "pg_opd" else hp.algorithm
    values: dict[str, object] = {**_COMMON, **PRESETS[name]}
    for knob in KNOB_NAMES:
        explicit = getattr(hp, knob, None)
        if explicit is not None:
            values[knob] = explicit
    if values["overlong_buffer_len"] == -1:
        values["overlong_buffer_len"] = max(1, (hp.max_length - hp.max_prompt_length) // 4)
    return AlgorithmKnobs(algorithm=name, kl_loss_coef=hp.kl_loss_coef, **values)
