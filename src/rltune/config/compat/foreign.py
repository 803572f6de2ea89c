"""Configs written for another tool, recognised before validation: verl's own YAML (its
sections ``actor_rollout_ref``, ``data``, ``algorithm``, ``trainer`` … at the top of the job,
or set one by one as ``rltune train --set data.train_files=…``) becomes rltune's job shape,
and a TRL ``GRPOConfig`` name (or any hyper-parameter) written at the top level is named as
such in the error.

verl's job-level names (``verl_names.JOB_KEYS``) become the job's keys: the model's path is
``model``, ``data.train_files`` / ``data.val_files`` (a file or a list) are the training and
validation ``datasets``, ``trainer.experiment_name`` / ``project_name`` the job's ``name`` and
``project``, ``actor_rollout_ref.rollout.name`` its ``engine`` (``vllm``; ``hf`` is the
built-in engine) and ``trainer.logger`` its trackers (``console`` needs none). Every other
name goes to ``training.hyper_parameters``, where the synonym table maps or refuses it
(``config/compat/synonyms.py``).

Example:
    >>> job = verl_to_job({"actor_rollout_ref": {"model": {"path": "small"},
    ...                                          "rollout": {"n": 8}},
    ...                    "data": {"train_files": "train.jsonl"}})
    >>> job["model"], job["datasets"], job["training"]
    ('small', [{'type': 'training', 'file_name': 'train.jsonl'}], {'hyper_parameters': \
{'actor_rollout_ref.rollout.n': 8}})
"""

from __future__ import annotations

from typing import Any, Optional

from rltune.config._base import coupling
from rltune.config.compat.synonyms import BY_NAME, flatten_verl
from rltune.config.compat.verl_names import SECTIONS


def is_verl_job(data: dict[str, Any]) -> bool:
    """A verl section (a mapping) at the top level of a job."""
    return any(k in SECTIONS and isinstance(v, dict) for k, v in data.items())


def _files(value: Any) -> list[str]:
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        value = [v.strip(" '\"") for v in value[1:-1].split(",") if v.strip()]
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _set(out: dict[str, Any], key: str, value: Any, name: str) -> None:
    if out.get(key) not in (None, value):
        raise coupling(name, value, f"sets {key} to {value!r}, but the job sets it to "
                       f"{out[key]!r}", "keep only one of them")
    out[key] = value


def _trackers(out: dict[str, Any], names: list[str]) -> None:
    if not names:
        return
    observability = dict(out.get("observability") or {})
    have = list(observability.get("trackers") or [])
    types = {t if isinstance(t, str) else t.get("type") for t in have}
    observability["trackers"] = have + [n for n in names if n not in types]
    out["observability"] = observability


def verl_to_job(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its verl sections turned into rltune's job shape (see the module doc)."""
    out = {k: v for k, v in data.items() if not (k in SECTIONS and isinstance(v, dict))}
    verl = flatten_verl({k: v for k, v in data.items() if k not in out})
    training = dict(out.get("training") or {})
    hp = dict(training.get("hyper_parameters") or {})
    datasets = list(out.get("datasets") or [])
    for name, value in verl.items():
        if name == "actor_rollout_ref.model.path":
            model = out.get("model")
            if isinstance(model, dict):
                _set(model, "name", value, name)
            else:
                _set(out, "model", value, name)
        elif name in ("data.train_files", "data.val_files"):
            kind = "training" if name == "data.train_files" else "validation"
            datasets += [{"type": kind, "file_name": f} for f in _files(value)]
        elif name in ("trainer.experiment_name", "trainer.project_name"):
            _set(out, "name" if name.endswith("experiment_name") else "project", value, name)
        elif name == "actor_rollout_ref.rollout.name":
            _set(out, "engine", {"hf": "builtin"}.get(str(value), value), name)
        elif name == "trainer.logger":
            _trackers(out, [t for t in _files(value) if t != "console"])
        else:
            hp[name] = value
    if datasets:
        out["datasets"] = datasets
    out["training"] = {**training, "hyper_parameters": hp}
    return out


def top_level_hint(key: str) -> Optional[str]:
    """The fix for a hyper-parameter (rltune's, TRL's or verl's) at the job's top level."""
    from rltune.config.hyperparams import HyperParameters

    if key in BY_NAME and BY_NAME[key].tool == "TRL" and key not in HyperParameters.model_fields:
        return ("this looks like a TRL GRPOConfig name: TRL's names go under "
                "training.hyper_parameters, where rltune maps them (docs/coming-from.md)")
    if key in HyperParameters.model_fields or key in BY_NAME:
        return f"{key} is a hyper-parameter: put it under training.hyper_parameters"
    return None
