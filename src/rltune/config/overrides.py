"""Overrides of a job config before it is validated: ``rltune train --set key=value``,
``rltune copy --set key=value`` and the REST ``copy`` operation's ``{"overrides": {...}}``.

``key`` is a dotted path into rltune's shape (``training.hyper_parameters.learning_rate``,
``model.name``, ``functions.0.weight``, ``datasets.0.file_id``, ``engine``), or the name of a
hyper-parameter alone (``learning_rate``, a knob such as ``clip_ratio_high``, or a TRL / verl
synonym such as ``num_generations``), or any of verl's dotted names (``algorithm.adv_estimator``,
``data.train_files``, ``actor_rollout_ref.model.path``: a verl launch line's overrides, each
after ``--set``); ``hyper_parameters.x`` is short for ``training.hyper_parameters.x``. A ``--set`` value is read as YAML (``4``,
``true``, ``[a, b]``, ``{k: v}``) except where the schema says the field is a string, where it
is kept as written. An object value is merged into the section it names, as JSON merge-patch
(RFC 7386) does: ``{"training": {"hyper_parameters": {"max_steps": 2}}}`` sets ``max_steps``
and keeps the other hyper-parameters, ``null`` inside it removes a key, a list replaces the
list. Validation then runs as for the file itself, so a bad value is refused naming its field.

Example:
    >>> apply_sets({"model": "small"}, ["num_generations=8", "engine=vllm",
    ...                                 "training.hyper_parameters.learning_rate=1e-5"])
    {'model': 'small', 'training': {'hyper_parameters': {'num_generations': 8, 'learning_rate': 1e-05}}, 'engine': 'vllm'}
    >>> apply_overrides({"name": "a", "model": "m"}, {"learning_rate": 1e-4})
    {'name': 'a', 'model': 'm', 'training': {'hyper_parameters': {'learning_rate': 0.0001}}}
"""  # noqa: E501

from __future__ import annotations

import copy
import typing
from collections.abc import Mapping
from typing import Any

import yaml

from rltune.config._base import _scalar_kind, closest, coerce_number
from rltune.config.compat.synonyms import BY_NAME
from rltune.config.compat.verl_names import SECTIONS as VERL_SECTIONS
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


def key_path(key: str) -> tuple[str, ...]:
    """The place of ``key`` in the config: a dotted path as written, or a bare hyper-parameter
    (or synonym) under ``training.hyper_parameters``; anything else is refused with a hint."""
    from rltune.config.hyperparams import HyperParameters
    from rltune.config.job import JobConfig

    key = str(key).strip()
    parts = tuple(key.split("."))
    if not key or any(not p for p in parts):
        raise ConfigError(f"override key {key!r} is not a dotted path", where=key or "key",
                          hint="write e.g. training.hyper_parameters.learning_rate")
    top = {*JobConfig.model_fields, "job_name", "mode",
           *(f.alias for f in JobConfig.model_fields.values() if f.alias)}
    if parts[0] == "hyper_parameters":
        return (*_HP, *parts[1:])
    if parts[0] in top:
        return parts
    if len(parts) > 1 and parts[0] in VERL_SECTIONS:  # verl's launch line: its own sections,
        return parts  # which the job reads as verl's YAML (config/compat/foreign.py)
    if key in HyperParameters.model_fields or key in BY_NAME:
        return (*_HP, key)
    known = [*top, *HyperParameters.model_fields, *BY_NAME]
    guess = closest(key, known)
    raise ConfigError(f"--set {key}: no such key", where=key,
                      hint=(f"did you mean '{guess}'? " if guess else "")
                      + "give a dotted path (training.hyper_parameters.learning_rate) or a "
                      "hyper-parameter name; `rltune config reference` lists them")


def parse_set(item: str) -> tuple[tuple[str, ...], Any]:
    """``"a.b=value"`` → (path, value typed by the schema)."""
    key, sep, raw = str(item).partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r} is not key=value", where=f"--set {item}",
                          hint="write --set training.hyper_parameters.learning_rate=1e-5")
    path = key_path(key)
    field = _field(path)
    if field is not None and _is_text(field.annotation):
        return path, raw
    try:
        value = yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:  # not YAML: a string
        value = raw
    kind = _scalar_kind(field.annotation) if field is not None else None
    name = ".".join(path[2:] if path[:2] == _HP else path)
    if kind is None and name in BY_NAME:  # a synonym: its target's
        target = BY_NAME[name].target
        hp_field = _field((*_HP, target))
        kind = _scalar_kind(hp_field.annotation) if hp_field is not None else None
    if kind is not None and isinstance(value, str):  # "1e-5" is a string to YAML 1.1
        value = coerce_number(value, kind)
    return path, value


def parse_assignment(item: str) -> tuple[str, Any]:
    """``"key=value"`` (``rltune copy --set``) → (the key as written, the typed value), for an
    ``overrides`` mapping sent to the server; an unknown key is refused here already."""
    _, value = parse_set(item)
    return str(item).partition("=")[0].strip(), value


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any, label: str) -> None:
    """Set ``value`` at ``path`` in ``data``, making sections on the way (a number indexes a
    list; ``model: name`` becomes ``model: {name: …}`` when a model key is set)."""
    node: Any = data
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(node, list):
            node = _index(node, part, label)
            continue
        if part == "model" and isinstance(node.get(part), str):
            node[part] = {"name": node[part]}
        current = node.get(part)
        if current is None:
            node[part] = current = [] if nxt.isdigit() else {}
        elif not isinstance(current, (dict, list)):
            raise ConfigError(f"{label}: {'.'.join(path[:i + 1])} is a value, not a section",
                              where=".".join(path[:i + 2]),
                              hint="set the section's own key instead")
        node = current
    last = path[-1]
    if isinstance(node, list):
        index = int(last) if last.isdigit() else None
        if index is None or index > len(node):
            raise ConfigError(f"{label}: no list entry {last}", where=".".join(path),
                              hint=f"the list has {len(node)} entries (numbered from 0)")
        node[index:index + 1] = [value]
    elif path == ("model",) and isinstance(node.get("model"), dict) and isinstance(value, str):
        node["model"]["name"] = value  # keeps the model's other keys
    elif isinstance(value, Mapping) and isinstance(node.get(last), dict):
        node[last] = merge_patch(node[last], value)
    else:
        node[last] = value


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``target`` with ``patch`` merged in, as JSON merge-patch (RFC 7386) does: an object
    merges key by key, ``null`` removes the key, anything else (a list too) replaces it.

    Example:
        >>> merge_patch({"hyper_parameters": {"learning_rate": 1e-3, "n_epochs": 1}},
        ...             {"hyper_parameters": {"max_steps": 2, "n_epochs": None}})
        {'hyper_parameters': {'learning_rate': 0.001, 'max_steps': 2}}
    """
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
    return out


def _index(node: list[Any], part: str, label: str) -> Any:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"{label}: no list entry {part}", where=label,
                          hint=f"the list has {len(node)} entries (numbered from 0)")
    return node[int(part)]


def _refuse_ark(data: Any, label: str) -> None:
    from rltune.config.compat.ark_job import is_ark_job

    if isinstance(data, dict) and is_ark_job(data):
        raise ConfigError("overrides edit rltune's job shape; this is a Volcano Ark job.yaml",
                          where=label, hint="edit the Ark file itself")


def apply_sets(data: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """``data`` (a job config dict, rltune's shape) with every ``key=value`` applied."""
    if sets:
        _refuse_ark(data, f"--set {sets[0]}")
    for item in sets:
        path, value = parse_set(item)
        _put(data, path, value, f"--set {item}")
    return data


def apply_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with each ``{key: value}`` override set at its place (the REST
    ``copy`` operation; values arrive typed as JSON)."""
    out = copy.deepcopy(dict(config))
    if overrides:
        _refuse_ark(out, f"override {next(iter(overrides))}")
    for key, value in overrides.items():
        _put(out, key_path(key), value, f"override {key}")
    return out


def load_job_config_with_sets(path: Any, sets: list[str]) -> Any:
    """``load_job_config(path)`` with ``--set`` items applied before validation."""
    from rltune.config.job import _validate
    from rltune.config.yaml_io import read_yaml_file

    doc = read_yaml_file(path)
    data = doc.data if not sets or not isinstance(doc.data, dict) else \
        apply_sets(doc.data, sets)
    return _validate(data, {}, doc)
