"""``GRPOConfig``: TRL's field names, turned into an rltune job's hyper-parameters.

Hyper-parameter names go through the one synonym table (``rltune.config.compat.synonyms``: TRL's
name → rltune's key, or refused naming the key to use); rltune's own key names are accepted
too. The fields that describe TRL's process rather than the algorithm (``output_dir``,
``per_device_train_batch_size``, ``logging_steps``, ``report_to`` …) are read here
(:data:`TRAINER_FIELDS`). Every field that cannot be honoured is named in one ``ConfigError``.

Unset fields take TRL's defaults (:data:`TRL_DEFAULTS`), so a script that relies on them
trains as it did under TRL.

Example:
    >>> cfg = GRPOConfig(output_dir="out", learning_rate=1e-5, num_generations=4,
    ...                  per_device_train_batch_size=8, max_completion_length=32)
    >>> hp = cfg.hyper_parameters()
    >>> hp["batch_size"], hp["num_generations"], hp["learning_rate"]
    (2, 4, 1e-05)
    >>> GRPOConfig(top_k=5, use_liger_kernel=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rltune.sdk.errors.ConfigError: GRPOConfig: 2 field(s) cannot be honoured: ...
"""

from __future__ import annotations

from typing import Any

from rltune.config.compat.synonyms import BY_NAME, translate
from rltune.sdk.errors import ConfigError

#: TRL 1.16's ``GRPOConfig`` defaults for the fields whose rltune default differs
#: (a test compares them with TRL's own when TRL is installed).
TRL_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-06, "per_device_train_batch_size": 8, "num_generations": 8,
    "max_completion_length": 512, "beta": 0.0, "num_train_epochs": 3.0, "temperature": 1.0,
    "top_p": 1.0, "epsilon": 0.2, "loss_type": "dapo", "scale_rewards": "group",
    "lr_scheduler_type": "linear", "warmup_steps": 0, "weight_decay": 0.0,
    "max_grad_norm": 1.0, "seed": 42, "save_strategy": "steps", "save_steps": 500,
    "num_iterations": 1, "logging_steps": 10, "gradient_accumulation_steps": 1,
    "max_steps": -1, "eval_strategy": "no", "report_to": "none", "output_dir": None,
    "push_to_hub": False, "hub_model_id": None, "max_tool_calling_iterations": None,
    "reward_weights": None, "run_name": None, "eval_steps": None,
    "num_generations_eval": None,
}

#: Fields this shim reads itself (they are about TRL's process, not the algorithm).
TRAINER_FIELDS = {
    "output_dir": "the job folder: metrics, trajectories, logs, checkpoints",
    "per_device_train_batch_size": "completions per step, with gradient_accumulation_steps "
                                   "(batch_size = their product / num_generations)",
    "gradient_accumulation_steps": "see per_device_train_batch_size (one update per step)",
    "logging_steps": "how often callbacks' on_log is called",
    "report_to": "trackers: none, tensorboard, wandb, mlflow, swanlab, trackio",
    "reward_weights": "each reward function's weight",
    "max_tool_calling_iterations": "tool-call rounds per rollout (unset: 8)",
    "push_to_hub": "push_to_hub() after train()",
    "hub_model_id": "the repository push_to_hub() writes",
    "run_name": "the job's name",
    "eval_strategy": "no (the eval_dataset is not used while training) or steps",
    "eval_steps": "validation every eval_steps steps (unset: logging_steps)",
    "num_generations_eval": "samples per validation prompt (rltune's val_n_rollouts)",
}

#: TRL's ``report_to`` values rltune has a tracker for.
_TRACKERS = ("tensorboard", "wandb", "mlflow", "swanlab", "trackio")


def _hp_fields() -> set[str]:
    from rltune.config.hyperparams import HyperParameters

    return set(HyperParameters.model_fields)


def _default(key: str) -> Any:
    from rltune.config.hyperparams import HyperParameters

    return HyperParameters.model_fields[key].default


class GRPOConfig:
    """TRL's ``GRPOConfig(...)`` (keyword arguments with TRL's names; rltune's keys too)."""

    def __init__(self, **fields: Any):
        self._given = dict(fields)
        self._values = {**TRL_DEFAULTS, **fields}
        problems = refusals(fields)
        if problems:
            raise ConfigError(
                f"{len(problems)} field(s) cannot be honoured: "
                + "; ".join(f"{name}: {why}" for name, why in problems),
                where="GRPOConfig", hint="remove them, or use the rltune key each names")

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"GRPOConfig has no field {name!r}")

    def __repr__(self) -> str:
        return f"GRPOConfig({', '.join(f'{k}={v!r}' for k, v in self._given.items())})"

    def to_dict(self) -> dict[str, Any]:
        """Every field, TRL's defaults included."""
        return dict(self._values)

    @property
    def generation_batch_size(self) -> int:
        """Completions per step (one device): per_device x gradient_accumulation_steps."""
        return int(self.per_device_train_batch_size) * int(self.gradient_accumulation_steps)

    def trackers(self) -> list[str]:
        value = self.report_to
        names = [value] if isinstance(value, str) else list(value or [])
        return [n for n in names if n not in ("none", None)]

    def hyper_parameters(self) -> dict[str, Any]:
        """``training.hyper_parameters`` (TRL's names kept: the job's validation renames
        them through the synonym table)."""
        v = self._values
        out = {k: val for k, val in v.items() if k not in TRAINER_FIELDS and val is not None}
        out["batch_size"] = self.generation_batch_size // int(v["num_generations"])
        out.setdefault("micro_batch_size", int(v["per_device_train_batch_size"]))
        if float(v["beta"]) == 0.0:  # TRL loads no reference model at beta 0
            out.setdefault("use_kl_loss", False)
        if v["max_steps"] is None or int(v["max_steps"]) <= 0:
            out.pop("max_steps", None)
        else:  # TRL: a positive max_steps overrides num_train_epochs
            out.pop("num_train_epochs", None)
        if v["eval_strategy"] == "steps":
            out["eval_steps"] = int(v["eval_steps"] or v["logging_steps"])
        if v["num_generations_eval"]:
            out["val_n_rollouts"] = int(v["num_generations_eval"])
        return out


def refusals(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """``(name, why)`` for each field that cannot be honoured (all of them, not the first)."""
    own = _hp_fields()
    values = {**TRL_DEFAULTS, **fields}
    out: list[tuple[str, str]] = []
    for name, value in fields.items():
        if name in TRAINER_FIELDS:
            why = _trainer_field_problem(name, value, values)
        elif name in BY_NAME or name in own:
            why = _synonym_problem(name, value)
        else:
            why = _unknown(name)
        if why:
            out.append((name, why))
    batch = values["per_device_train_batch_size"], values["gradient_accumulation_steps"]
    total = int(batch[0]) * int(batch[1])
    if total % int(values["num_generations"]):
        out.append(("per_device_train_batch_size",
                    f"the {total} completions per step (per_device_train_batch_size x "
                    f"gradient_accumulation_steps) are not a multiple of num_generations "
                    f"{values['num_generations']}"))
    return out


def _trainer_field_problem(name: str, value: Any, values: dict[str, Any]) -> str:
    if name == "report_to":
        names = [value] if isinstance(value, str) else list(value or [])
        bad = [n for n in names if n not in ("none", *_TRACKERS)]
        return f"no tracker {', '.join(map(str, bad))}; use {', '.join(_TRACKERS)}" if bad else ""
    if name == "eval_strategy" and value not in ("no", "steps"):
        return f"{value!r} is not supported; use 'steps' with eval_steps"
    if name == "gradient_accumulation_steps" and int(value) < 1:
        return "must be at least 1"
    return ""


def _synonym_problem(name: str, value: Any) -> str:
    """The synonym table's refusal of one field (its name, or this value of it)."""
    _, found = translate({name: value}, _default)
    return "; ".join(f"{p['rule']} ({p['fix']})" for p in found)


def _unknown(name: str) -> str:
    from rltune.config._base import closest

    near = closest(name, [*TRAINER_FIELDS, *BY_NAME, *_hp_fields()])
    return ("no rltune equivalent (the TRL fields rltune honours are listed in "
            "docs/coming-from.md)" + (f"; did you mean {near}?" if near else ""))
