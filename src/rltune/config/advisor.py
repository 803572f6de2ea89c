"""The job's ``advisor:`` block: the training doctor (``rltune.doctor``) that reads each step's
metrics and writes alerts to ``alerts.jsonl``, and the default thresholds of its detectors.

Every detector has a code (``P3``, ``hack/length``, …) and named thresholds; ``docs/doctor.md``
explains each. A job overrides a threshold per code, or turns codes off::

    advisor:
      enabled: true                 # default
      off: [P2]                     # these codes never fire
      thresholds:
        P9: {clip_ratio: 0.3}       # override one threshold of one code

An unknown code, or a threshold a code does not have, is refused naming it.

Example:
    >>> AdvisorConfig(thresholds={"P9": {"clip_ratio": 0.3}}).threshold("P9", "clip_ratio")
    0.3
    >>> AdvisorConfig().threshold("P9", "clip_ratio")
    0.1
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from rltune.config._base import StrictModel, closest

#: code -> threshold name -> default. ``window`` counts steps; shares are in [0, 1].
DEFAULT_THRESHOLDS: dict[str, dict[str, float]] = {
    # the seed decision table (P1-P9)
    "P1": {"window": 10, "reward_range": 0.02, "ppo_kl": 1e-5, "grad_norm": 1e-4},
    "P2": {"window": 8, "amplitude": 0.25, "flip_share": 0.7, "noise": 2.0},
    "P3": {"kl": 0.5, "window": 3, "spike": 2.0},
    "kl-zero": {"window": 10, "kl": 1e-6, "reward_range": 0.02},
    "P4": {"entropy": 0.05, "drop": 0.8, "window": 3, "solved_share": 0.75, "agree": 0.5},
    "slow-rollouts": {"window": 3, "rollout_share": 0.9, "min_step_s": 60.0},
    "OOM": {"errors": 1},
    "P6": {"window": 3, "val_drop": 0.1, "train_rise": 0.1},
    "P9": {"window": 3, "clip_ratio": 0.1},  # docs/doctor.md: why a tenth
    # reward hacking
    "hack/length": {"window": 6, "correlation": 0.8, "length_growth": 0.3, "reward_rise": 0.1,
                    "warmup": 10},
    "hack/divergence": {"window": 3, "gap": 0.3, "train_rise": 0.1},
    "hack/component": {"window": 3, "share": 0.9},
    "hack/format": {"window": 3, "share": 0.6},
    "hack/mode-collapse": {"window": 3, "identical_share": 0.5, "solved_share": 0.75},
    # pipeline health
    "pipeline/dropped": {"window": 3, "share": 0.2},
    "pipeline/error": {"window": 3, "share": 0.5, "min_failures": 3},
    "pipeline/template-rewrites": {"window": 3, "per_rollout": 0.1},
    "pipeline/staleness": {"window": 5, "dropped_share": 0.2},
    "pipeline/capacity": {"window": 3, "attempts": 1.5},
}


class AdvisorConfig(StrictModel):
    """The ``advisor:`` block of a job (see the module docstring)."""

    enabled: bool = Field(True, description="run the doctor during the job")
    off: list[str] = Field(default_factory=list, description="codes that never fire")
    thresholds: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="code -> {threshold: value} overrides"
    )

    @field_validator("off")
    @classmethod
    def _known_codes(cls, value: list[str]) -> list[str]:
        for code in value:
            _check_code(code, "advisor.off")
        return value

    @field_validator("thresholds")
    @classmethod
    def _known_thresholds(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for code, overrides in value.items():
            _check_code(code, "advisor.thresholds")
            known = DEFAULT_THRESHOLDS[code]
            for name in overrides:
                if name not in known:
                    near = closest(name, known)
                    raise ValueError(
                        f"advisor.thresholds.{code}.{name}: {code} has no threshold {name!r}"
                        + (f" (did you mean {near!r}?)" if near else "")
                        + f"; its thresholds are {sorted(known)}"
                    )
        return value

    def threshold(self, code: str, name: str) -> float:
        return float(self.thresholds.get(code, {}).get(name, DEFAULT_THRESHOLDS[code][name]))

    def thresholds_for(self, code: str) -> dict[str, float]:
        return {**DEFAULT_THRESHOLDS[code], **self.thresholds.get(code, {})}


def _check_code(code: Any, where: str) -> None:
    if code not in DEFAULT_THRESHOLDS:
        near = closest(str(code), DEFAULT_THRESHOLDS)
        raise ValueError(
            f"{where}: unknown doctor code {code!r}"
            + (f" (did you mean {near!r}?)" if near else "")
            + f"; the codes are {sorted(DEFAULT_THRESHOLDS)}"
        )
