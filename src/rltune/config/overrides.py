"""Overrides of a job config in its SDK shape: ``{"dotted.key": value}`` (``copy``, ``--set``).

A key is a path into the config (``training.hyper_parameters.learning_rate``,
``datasets.0.file_id``); a bare hyper-parameter name (``learning_rate``) is short for its place
under ``training.hyper_parameters``. The result is validated as any job config is, so a bad
value is refused naming its field.

Example:
    >>> apply_overrides({"name": "a", "training": {"hyper_parameters": {"n_epochs": 1}}},
    ...                 {"learning_rate": 1e-4, "training.hyper_parameters.n_epochs": 2})
    {'name': 'a', 'training': {'hyper_parameters': {'n_epochs': 2, 'learning_rate': 0.0001}}}
    >>> parse_assignment("hyper_parameters.batch_size=4")
    ('hyper_parameters.batch_size', 4)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rltune.sdk.errors import ValidationError

HP_PATH = ("training", "hyper_parameters")


def _top_level_fields() -> set[str]:
    from rltune.config.job import JobConfig

    return {f.alias or n for n, f in JobConfig.model_fields.items()} | set(JobConfig.model_fields)


def _hyper_parameter_names() -> set[str]:
    from rltune.config.hyperparams import HyperParameters

    return set(HyperParameters.model_fields)


def key_path(key: str) -> list[str]:
    """The path of an override key; a bare hyper-parameter name goes under
    ``training.hyper_parameters`` (``hyper_parameters.x`` too)."""
    parts = [p for p in str(key).strip().split(".")]
    if not key or any(not p for p in parts):
        raise ValidationError(f"override key {key!r} is not a dotted path", where=str(key),
                              hint="write e.g. training.hyper_parameters.learning_rate")
    if parts[0] == "hyper_parameters":
        return [*HP_PATH, *parts[1:]]
    if len(parts) == 1 and parts[0] not in _top_level_fields() \
            and parts[0] in _hyper_parameter_names():
        return [*HP_PATH, parts[0]]
    return parts


def apply_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with each override set at its path (dicts made on the way; a
    number indexes a list)."""
    out = copy.deepcopy(dict(config))
    for key, value in overrides.items():
        path = key_path(key)
        node: Any = out
        for i, part in enumerate(path):
            last = i == len(path) - 1
            where = ".".join(path[:i + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ValidationError(
                        f"override {key!r}: {'.'.join(path[:i]) or 'the config'} is a list of "
                        f"{len(node)}; {part!r} is not one of its indexes", where=where,
                        hint=f"use an index from 0 to {len(node) - 1}")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
                continue
            if not isinstance(node, dict):
                raise ValidationError(
                    f"override {key!r}: {'.'.join(path[:i])} is a value, not a section",
                    where=where, hint="set the section's own key instead")
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
                if node is None:
                    node = {}
    return out


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` (a ``--set`` option) → (key, value); the value is read as YAML, so
    ``4`` is a number, ``true`` a bool, ``null`` unset and ``[a, b]`` a list."""
    import yaml

    key, sep, raw = str(text).partition("=")
    if not sep or not key.strip():
        raise ValidationError(f"--set {text!r} is not key=value", where="--set",
                              hint="write e.g. --set learning_rate=1e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:  # a value that is not YAML is a string
        value = raw
    if isinstance(value, dict) and not raw.lstrip().startswith("{"):
        value = raw  # "calc: v2" is a name, not a mapping
    if isinstance(value, str):
        try:
            value = float(value) if value.strip().lower() not in ("nan", "inf", "-inf",
                                                                  "infinity") else value
        except ValueError:
            pass  # YAML 1.1 reads 1e-5 as a string; a number it is
    return key.strip(), value
