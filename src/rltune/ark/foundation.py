"""``rltune ark get foundation-model --model NAME --fields hyperparameters``: the
hyper-parameters an Ark job may set on rltune, with rltune's name, default and range, read
from ``HyperParameters`` and the algorithm knobs (``config/algorithm.py`` KNOBS).

Example:
    >>> hp = {h["name"]: h for h in ark_hyperparameters()}
    >>> hp["num_generations"]["rltune"], hp["clip_ratio_high"]["default"]
    ('n_rollouts', 0.2)
"""

from __future__ import annotations

from typing import Any

from rltune.config.compat.ark_job import _HP_RENAMES


def _bounds(field: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for meta in field.metadata:
        for attr in ("ge", "gt", "le", "lt"):
            value = getattr(meta, attr, None)
            if value is not None:
                out[attr] = value
    return out


def ark_hyperparameters() -> list[dict[str, Any]]:
    """One entry per Ark hyper-parameter: Ark name, rltune name, default, range, text."""
    from rltune.config.algorithm import KNOBS
    from rltune.config.hyperparams import HyperParameters

    fields = HyperParameters.model_fields
    names = {**_HP_RENAMES, "save_every_n_steps": "save_steps",
             "max_new_tokens": "max_length", "test_top_p": "top_p"}
    out = []
    for ark, ours in sorted(names.items()):
        field = fields[ours]
        knob = KNOBS.get(ours)
        default = knob.default if knob is not None and field.default is None else field.default
        range_ = _bounds(field) or ({k: getattr(knob, k) for k in ("ge", "gt", "le", "lt")
                                     if knob is not None and getattr(knob, k) is not None})
        note = field.description or (knob.text if knob else "")
        if ark == "max_new_tokens":
            note = "max_length = max_prompt_length + max_new_tokens"
            default = fields["max_length"].default - fields["max_prompt_length"].default
        out.append({"name": ark, "rltune": ours, "default": default, "range": range_,
                    "description": note})
    return out


def foundation_model(model: str, fields: list[str]) -> dict[str, Any]:
    """What ``ark get foundation-model`` shows for ``model`` (only ``hyperparameters``)."""
    out: dict[str, Any] = {"model": model,
                           "customization_types": ["GRPO", "GRPOLoRA"]}
    for f in fields:
        if f != "hyperparameters":
            from rltune.sdk.errors import ConfigError

            raise ConfigError(f"--fields {f!r} has no counterpart in rltune",
                              where="--fields", hint="use --fields hyperparameters")
        out["hyperparameters"] = ark_hyperparameters()
    return out
