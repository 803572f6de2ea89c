"""``--set key=value``: override any field of a job config before it is validated.

``key`` is a dotted path into rltune's shape (``training.hyper_parameters.learning_rate``,
``model.name``, ``functions.0.weight``, ``engine``), or the name of a hyper-parameter alone
(``learning_rate``, a knob such as ``clip_ratio_high``, or a TRL / verl synonym such as
``num_generations`` or ``actor_rollout_ref.rollout.n``). The value is read as YAML
(``4``, ``true``, ``[a, b]``, ``{k: v}``) except where the schema says the field is a
string, where it is kept as written. Validation then runs as for the file itself.

Example:
    >>> apply_sets({"model": "small"}, ["num_generations=8", "engine=vllm",
    ...                                 "training.hyper_parameters.learning_rate=1e-5"])
    {'model': 'small', 'training': {'hyper_parameters': {'num_generations': 8, 'learning_rate': 1e-05}}, 'engine': 'vllm'}
"""  # noqa: E501

from __future__ import annotations

import typing
from typing import Any

import yaml

from rltune.config._base import _scalar_kind, closest, coerce_number
from rltune.config.synonyms import BY_NAME
from rltune.sdk.errors import ConfigError

_HP = ("training", "hyper_parameters")


def _is_text(annotation: Any) -> bool:
    if annotation is str:
        return True
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return typing.get_origin(annotation) is typing.Union and args == [str]


def _field(path: tuple[str, ...]) -> Any:
    """The pydantic field at ``path`` in ``JobConfig`` (None when the path leaves the models)."""
    from pydantic import BaseModel

    from rltune.config.job import JobConfig

    model: Any = JobConfig
    field = None
    for part in path:
        if part.isdigit():
            continue
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        field = fields[part]
        candidates = [a for a in (field.annotation, *typing.get_args(field.annotation),
                                  *(typing.get_args(a) for a in typing.get_args(
                                      field.annotation)))
                      if isinstance(a, type) and issubclass(a, BaseModel)]
        model = candidates[0] if candidates else None
    return field


def _path(key: str) -> tuple[str, ...]:
    from rltune.config.hyperparams import HyperParameters
    from rltune.config.job import JobConfig

    first = key.split(".", 1)[0]
    if first in JobConfig.model_fields or first in ("job_name", "mode"):
        return tuple(key.split("."))
    if key in HyperParameters.model_fields or key in BY_NAME:
        return (*_HP, key)
    known = [*JobConfig.model_fields, *HyperParameters.model_fields, *BY_NAME]
    guess = closest(key, known)
    raise ConfigError(f"--set {key}: no such key", where=f"--set {key}",
                      hint=(f"did you mean '{guess}'? " if guess else "")
                      + "give a dotted path (training.hyper_parameters.learning_rate) or a "
                      "hyper-parameter name; `rltune config reference` lists them")


def parse_set(item: str) -> tuple[tuple[str, ...], Any]:
    """``"a.b=value"`` → (path, typed value)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r} is not key=value", where=f"--set {item}",
                          hint="write --set training.hyper_parameters.learning_rate=1e-5")
    path = _path(key)
    field = _field(path)
    if field is not None and _is_text(field.annotation):
        return path, raw
    try:
        value = yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        value = raw
    kind = _scalar_kind(field.annotation) if field is not None else None
    if kind is None and path[:2] == _HP and path[-1] in BY_NAME:  # a synonym: its target's
        target = BY_NAME[path[-1]].target
        hp_field = _field((*_HP, target))
        kind = _scalar_kind(hp_field.annotation) if hp_field is not None else None
    if kind is not None and isinstance(value, str):  # "1e-5" is a string to YAML 1.1
        value = coerce_number(value, kind)
    return path, value


def apply_sets(data: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """``data`` (a job config dict, rltune's shape) with every ``key=value`` applied."""
    from rltune.config.ark_job import is_ark_job

    if sets and is_ark_job(data):
        raise ConfigError("--set edits rltune's job shape; this is a Volcano Ark job.yaml",
                          where=f"--set {sets[0]}", hint="edit the Ark file itself")
    for item in sets:
        path, value = parse_set(item)
        node: Any = data
        for i, part in enumerate(path[:-1]):
            nxt = path[i + 1]
            if isinstance(node, list):
                node = _index(node, part, item)
                continue
            if part == "model" and isinstance(node.get(part), str):
                node[part] = {"name": node[part]}
            if not isinstance(node.get(part), (dict, list)):
                node[part] = [] if nxt.isdigit() else {}
            node = node[part]
        last = path[-1]
        if isinstance(node, list):
            index = int(last) if last.isdigit() else None
            if index is None or index > len(node):
                raise ConfigError(f"--set {item}: no list entry {last}", where=f"--set {item}",
                                  hint=f"the list has {len(node)} entries")
            node[index:index + 1] = [value]
        elif path == ("model",) and isinstance(node.get("model"), dict) and \
                isinstance(value, str):
            node["model"]["name"] = value  # keeps the model's other keys
        else:
            node[last] = value
    return data


def load_job_config_with_sets(path: Any, sets: list[str]) -> Any:
    """``load_job_config(path)`` with ``--set`` items applied before validation."""
    from rltune.config.job import _validate
    from rltune.config.yaml_io import read_yaml_file

    doc = read_yaml_file(path)
    data = doc.data if not sets or not isinstance(doc.data, dict) else \
        apply_sets(doc.data, sets)
    return _validate(data, {}, doc)


def _index(node: list[Any], part: str, item: str) -> Any:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"--set {item}: no list entry {part}", where=f"--set {item}",
                          hint=f"the list has {len(node)} entries (numbered from 0)")
    return node[int(part)]
