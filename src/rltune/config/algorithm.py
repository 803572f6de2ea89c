"""Algorithm presets: each is a set of knob values over one PPO-clip core (docs/config.md).

Each knob is declared once in ``KNOBS`` (type, range, description, paper, default). The
hyper-parameter of the same name (its override, ``KnobOverrides``: a knob set explicitly wins
over the preset) and the resolved ``AlgorithmKnobs`` are static classes (so a type checker sees
their fields) whose fields take range and description from that declaration, kept equal to it
by a test. This module is pure (no
torch) so the server and CLI can show the resolved values.

Example:
    >>> from rltune.config import HyperParameters, resolve_algorithm
    >>> k = resolve_algorithm(HyperParameters(algorithm="dapo", n_rollouts=4))
    >>> k.clip_ratio_low, k.clip_ratio_high, k.loss_agg_mode, k.use_kl_loss
    (0.2, 0.28, 'token-mean', False)
    >>> resolve_algorithm(HyperParameters(algorithm="gspo", clip_ratio_high=1e-3)).clip_ratio_high
    0.001
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from rltune.config._base import StrictModel
from rltune.names import (
    ADVANTAGE_ESTIMATORS,
    ALGORITHMS,
    DpoLossType,
    ImportanceLevel,
    KLEstimator,
    LossAggMode,
    check_registry,
    literal,
)

if TYPE_CHECKING:
    from rltune.config.hyperparams import HyperParameters

if TYPE_CHECKING:  # a type checker sees these names as str; pydantic checks the Literal
    AlgorithmName = str
    AdvantageEstimator = str
else:
    AlgorithmName = literal(ALGORITHMS)
    AdvantageEstimator = literal(ADVANTAGE_ESTIMATORS)


@dataclass(frozen=True)
class Knob:
    """One algorithm knob, declared once: its type and range, what it does, where it comes
    from, and its value when a preset does not set it. The hyper-parameter of the same name
    (the override, ``None`` = the preset's) is built from it; ``AlgorithmKnobs`` (the resolved
    value) declares a field of its type, described by it."""

    type: Any
    default: object
    description: str
    paper: str = ""
    #: A preset may turn the knob off with None (e.g. OPD has no clipping).
    nullable: bool = False
    #: False: set by the preset only (no hyper-parameter of that name).
    overridable: bool = True
    #: The algorithms the knob applies to (empty: all); set for another, it is refused.
    only: tuple[str, ...] = ()
    ge: Optional[float] = None
    gt: Optional[float] = None
    le: Optional[float] = None
    lt: Optional[float] = None

    @property
    def resolved_type(self) -> Any:
        """The type of the resolved value (``AlgorithmKnobs``'s field)."""
        return Optional[self.type] if self.nullable else self.type

    @property
    def text(self) -> str:
        return f"{self.description} ({self.paper})" if self.paper else self.description

    def override(self) -> tuple[Any, Any]:
        """The hyper-parameter twin: optional, in range, None = the preset's value."""
        return (Optional[self.type], Field(None, ge=self.ge, gt=self.gt, le=self.le,
                                           lt=self.lt, description=self.text))



_DAPO = "DAPO, arXiv:2503.14476"
_GAE = "GAE, arXiv:1506.02438"
_DPO = "DPO, arXiv:2305.18290"
#: Every algorithm knob. Adding one: an entry here and its value in the presets that change
#: it (``PRESETS``); the loss or the step reads it from ``AlgorithmKnobs``.
KNOBS: dict[str, Knob] = {
    "importance_sampling_level": Knob(
        ImportanceLevel, "token", "where the importance ratio is taken: per token, or one "
        "ratio per sequence (exp of the mean token log-ratio)", "GSPO, arXiv:2507.18071"),
    "clip_ratio_low": Knob(
        float, 0.2, "the ratio is clipped below at 1 - clip_ratio_low (None: no clipping)",
        "PPO, arXiv:1707.06347", nullable=True, ge=0, lt=1),
    "clip_ratio_high": Knob(
        float, 0.2, "the ratio is clipped above at 1 + clip_ratio_high (clip-higher: above "
        "clip_ratio_low)", _DAPO, nullable=True, ge=0, le=10),
    "clip_ratio_c": Knob(
        float, None, "dual-clip bound of the loss for negative advantages (None: off)",
        "dual-clip PPO, arXiv:1912.09729", nullable=True, gt=1, le=100),
    "loss_agg_mode": Knob(
        LossAggMode, "seq-mean-token-mean", "how per-token losses become one number: a token "
        "mean over the batch, or per-sequence means or sums averaged over sequences", _DAPO),
    "use_kl_loss": Knob(
        bool, True, "add kl_loss_coef x the KL to the frozen reference model to the loss",
        "GRPO, arXiv:2402.03300"),
    "kl_estimator": Knob(
        KLEstimator, "k3", "the estimator of KL(policy | reference) per token",
        "Schulman, Approximating KL Divergence, 2020"),
    "advantage_estimator": Knob(
        AdvantageEstimator, "grpo", "grpo: rewards normalised within each prompt's group; "
        "opd: the teacher's per-token reverse KL", "on-policy distillation, arXiv:2306.13649",
        overridable=False),
    "norm_adv_by_std": Knob(
        bool, True, "divide group advantages by the group's reward std (false: Dr. GRPO)",
        "Dr. GRPO, arXiv:2503.20783"),
    "dynamic_sampling": Knob(
        bool, False, "drop groups whose rewards are all equal and sample more prompts", _DAPO),
    "max_sampling_rounds": Knob(
        int, 3, "with dynamic_sampling: at most this many sampling rounds per step", _DAPO,
        ge=1, le=100),
    "overlong_buffer_len": Knob(
        int, 0, "responses within this many tokens of the length limit get a linear penalty "
        "(-1: a quarter of the response budget, 0: off)", _DAPO, ge=-1, le=131072),
    "overlong_penalty_factor": Knob(
        float, 0.0, "the overlong penalty at the length limit", _DAPO, ge=0, le=100),
    "entropy_coeff": Knob(
        float, 0.0, "weight of the entropy bonus in the loss", "PPO, arXiv:1707.06347",
        ge=0, le=10),
    "ppo_epochs": Knob(
        int, 1, "passes over each step's batch (TRL's mu)", "PPO, arXiv:1707.06347",
        ge=1, le=100),
    # --- PPO's critic (``trainer/signals/critic.py``, ``trainer/signals/gae.py``): ppo only ---
    "gamma": Knob(
        float, 1.0, "GAE discount per policy token (tool and observation tokens do not count)",
        _GAE, ge=0, le=1, only=("ppo",)),
    "lam": Knob(
        float, 1.0, "GAE lambda: 1 = Monte-Carlo returns minus the value, 0 = one-step TD",
        _GAE, ge=0, le=1, only=("ppo",)),
    "critic_lr": Knob(
        float, None, "learning rate of the critic (None: the job's learning_rate)",
        "PPO, arXiv:1707.06347", nullable=True, gt=0, le=1, only=("ppo",)),
    "vf_clip": Knob(
        float, 0.5, "the new value prediction is clipped to old value +- vf_clip in the value "
        "loss (None: no clipping)", "PPO, arXiv:1707.06347", nullable=True, gt=0, le=1e6,
        only=("ppo",)),
    "critic_warmup_steps": Knob(
        int, 0, "first steps in which only the critic trains (the policy is frozen)",
        "verl critic_warmup", ge=0, le=1_000_000, only=("ppo",)),
    # --- DPO (``trainer/dpo.py``, ``losses.dpo_loss_B``): algorithm dpo only ---
    "dpo_beta": Knob(
        float, 0.1, "how far the policy may move from the reference: the implicit reward is "
        "dpo_beta x the log-ratio to the reference (TRL's beta)", _DPO, gt=0, le=100,
        only=("dpo",)),
    "dpo_loss_type": Knob(
        DpoLossType, "sigmoid", "sigmoid: -log sigmoid of the reward margin (DPO); ipo: the "
        "squared distance of the log-ratio margin from 1 / (2 dpo_beta)",
        "IPO, arXiv:2310.12036", only=("dpo",)),
    "dpo_label_smoothing": Knob(
        float, 0.0, "with the sigmoid loss: the assumed share of pairs whose labels are "
        "swapped (conservative DPO; 0: off)", _DPO, ge=0, lt=0.5, only=("dpo",)),
    "dpo_nll_weight": Knob(
        float, 0.0, "weight of the chosen responses' token-mean negative log-likelihood added "
        "to the loss, so that the chosen answers do not lose probability (TRL's rpo_alpha; "
        "0: off)", "RPO, arXiv:2404.19733", ge=0, le=100, only=("dpo",)),
}

#: The knob names a user may set alone (hyper-parameters of the same name).
KNOB_NAMES = tuple(name for name, knob in KNOBS.items() if knob.overridable)

def _knob(name: str) -> Any:
    """A resolved knob's field: required, described by its ``KNOBS`` entry."""
    return Field(..., description=KNOBS[name].text)


class AlgorithmKnobs(BaseModel):
    """The resolved knobs the loss and the step loop read. Build with ``resolve_algorithm``.

    One field per ``KNOBS`` entry, of the knob's type (``Optional`` where a preset may turn
    it off), so that a type checker and an editor see them; the description, range and
    default stay in ``KNOBS`` alone (tests/config/test_algorithm.py keeps the two equal).
    """

    model_config = ConfigDict(frozen=True)

    algorithm: AlgorithmName
    kl_loss_coef: float
    importance_sampling_level: ImportanceLevel = _knob("importance_sampling_level")
    clip_ratio_low: Optional[float] = _knob("clip_ratio_low")
    clip_ratio_high: Optional[float] = _knob("clip_ratio_high")
    clip_ratio_c: Optional[float] = _knob("clip_ratio_c")
    loss_agg_mode: LossAggMode = _knob("loss_agg_mode")
    use_kl_loss: bool = _knob("use_kl_loss")
    kl_estimator: KLEstimator = _knob("kl_estimator")
    advantage_estimator: AdvantageEstimator = _knob("advantage_estimator")
    norm_adv_by_std: bool = _knob("norm_adv_by_std")
    dynamic_sampling: bool = _knob("dynamic_sampling")
    max_sampling_rounds: int = _knob("max_sampling_rounds")
    overlong_buffer_len: int = _knob("overlong_buffer_len")
    overlong_penalty_factor: float = _knob("overlong_penalty_factor")
    entropy_coeff: float = _knob("entropy_coeff")
    ppo_epochs: int = _knob("ppo_epochs")
    gamma: float = _knob("gamma")
    lam: float = _knob("lam")
    critic_lr: Optional[float] = _knob("critic_lr")
    dpo_beta: float = _knob("dpo_beta")
    dpo_loss_type: DpoLossType = _knob("dpo_loss_type")
    dpo_label_smoothing: float = _knob("dpo_label_smoothing")
    dpo_nll_weight: float = _knob("dpo_nll_weight")
    vf_clip: Optional[float] = _knob("vf_clip")
    critic_warmup_steps: int = _knob("critic_warmup_steps")


def _override(name: str) -> Any:
    """An override's field: optional (None = the preset's value), in the knob's range,
    described by its ``KNOBS`` entry."""
    return KNOBS[name].override()[1]


class KnobOverrides(StrictModel):
    """The algorithm knobs as hyper-parameters (``HyperParameters``' base): one optional field
    per overridable ``KNOBS`` entry, of the knob's type, so that a type checker and an editor
    see them; range and description come from ``KNOBS`` (tests/config/test_algorithm.py keeps
    the two equal). None: the preset's value."""

    importance_sampling_level: Optional[ImportanceLevel] = _override("importance_sampling_level")
    clip_ratio_low: Optional[float] = _override("clip_ratio_low")
    clip_ratio_high: Optional[float] = _override("clip_ratio_high")
    clip_ratio_c: Optional[float] = _override("clip_ratio_c")
    loss_agg_mode: Optional[LossAggMode] = _override("loss_agg_mode")
    use_kl_loss: Optional[bool] = _override("use_kl_loss")
    kl_estimator: Optional[KLEstimator] = _override("kl_estimator")
    norm_adv_by_std: Optional[bool] = _override("norm_adv_by_std")
    dynamic_sampling: Optional[bool] = _override("dynamic_sampling")
    max_sampling_rounds: Optional[int] = _override("max_sampling_rounds")
    overlong_buffer_len: Optional[int] = _override("overlong_buffer_len")
    overlong_penalty_factor: Optional[float] = _override("overlong_penalty_factor")
    entropy_coeff: Optional[float] = _override("entropy_coeff")
    ppo_epochs: Optional[int] = _override("ppo_epochs")
    gamma: Optional[float] = _override("gamma")
    lam: Optional[float] = _override("lam")
    critic_lr: Optional[float] = _override("critic_lr")
    vf_clip: Optional[float] = _override("vf_clip")
    critic_warmup_steps: Optional[int] = _override("critic_warmup_steps")
    dpo_beta: Optional[float] = _override("dpo_beta")
    dpo_loss_type: Optional[DpoLossType] = _override("dpo_loss_type")
    dpo_label_smoothing: Optional[float] = _override("dpo_label_smoothing")
    dpo_nll_weight: Optional[float] = _override("dpo_nll_weight")


#: What each preset changes; every other knob keeps its ``default`` (GRPO's values).
_PRESET_CHANGES: dict[str, dict[str, object]] = {
    "grpo": {},
    "gspo": {
        # GSPO paper: sequence ratios sit very close to 1, hence the tiny clip range.
        "importance_sampling_level": "sequence",
        "clip_ratio_low": 3e-4,
        "clip_ratio_high": 4e-4,
        "loss_agg_mode": "seq-mean",
    },
    "dapo": {
        "clip_ratio_high": 0.28,
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
        "dynamic_sampling": True,
        # The paper uses 4096 of 20480 tokens; scaled down, a quarter of the response budget.
        "overlong_buffer_len": -1,
        "overlong_penalty_factor": 1.0,
    },
    "ppo": {  # PPO with a critic and GAE (verl's defaults): token-level clipping, no KL term
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
        "advantage_estimator": "gae",
    },
    # Supervised fine-tuning (``trainer/sft.py``): no rollouts, so no clipping or KL term.
    "sft": {
        "clip_ratio_low": None,
        "clip_ratio_high": None,
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
    },
    # Preference optimisation (``trainer/dpo.py``): no rollouts; the reference is dpo_beta's.
    "dpo": {
        "clip_ratio_low": None,
        "clip_ratio_high": None,
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
    },
    "opd": {
        "clip_ratio_low": None,
        "clip_ratio_high": None,
        "loss_agg_mode": "token-mean",
        "use_kl_loss": False,
        "advantage_estimator": "opd",
    },
}
check_registry("algorithm preset", ALGORITHMS, _PRESET_CHANGES)
for _changes in _PRESET_CHANGES.values():
    assert set(_changes) <= set(KNOBS), sorted(set(_changes) - set(KNOBS))

#: Every knob's value in each preset.
PRESETS: dict[str, dict[str, object]] = {
    name: {knob: changes.get(knob, spec.default) for knob, spec in KNOBS.items()}
    for name, changes in _PRESET_CHANGES.items()
}


def misplaced_knob(hp: HyperParameters) -> Optional[tuple[str, tuple[str, ...]]]:
    """The first knob set in ``hp`` that does not apply to ``hp.algorithm``, with the
    algorithms it applies to (a knob that would be ignored is refused, not accepted)."""
    for name, knob in KNOBS.items():
        if knob.only and hp.algorithm not in knob.only and getattr(hp, name, None) is not None:
            return name, knob.only
    return None


def resolve_algorithm(hp: HyperParameters, training_type: str = "reinforcement") -> AlgorithmKnobs:
    """Merge the preset of ``hp.algorithm`` (``opd`` when ``training_type`` is ``pg_opd``)
    with the knobs set explicitly in ``hp``."""
    kind = getattr(training_type, "value", training_type)
    name = "opd" if kind == "pg_opd" else hp.algorithm
    values = dict(PRESETS[name])
    for knob in KNOB_NAMES:
        explicit = getattr(hp, knob, None)
        if explicit is not None:
            values[knob] = explicit
    if values["overlong_buffer_len"] == -1:
        values["overlong_buffer_len"] = max(1, (hp.max_length - hp.max_prompt_length) // 4)
    return AlgorithmKnobs(algorithm=name, kl_loss_coef=hp.kl_loss_coef, **values)
