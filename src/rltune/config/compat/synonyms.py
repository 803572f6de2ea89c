"""TRL's and verl's names for rltune's hyper-parameters: the one mapping table.

Each entry of ``SYNONYMS`` (``config/compat/trl_names.py``, ``config/compat/verl_names.py``)
is a synonym
(the key is rewritten to rltune's, the value converted where the units differ), a no-op
(accepted and dropped, with the reason: ``logging_steps``, ``report_to: none``), or a refusal
(names the rltune key to use and why there is no equivalent). Synonyms are accepted wherever
``training.hyper_parameters`` is (YAML, the SDK, REST, ``rltune train --set``); verl's names
are written dotted, as in its command-line overrides (``actor_rollout_ref.rollout.n: 8``), or
nested as in its YAML. A synonym and the rltune key (or two synonyms of one key) with
different values are an error. Every problem is reported at once (``translate``).

The table in ``docs/coming-from.md`` is ``markdown_table()`` (a test keeps them equal).
``trl_to_rltune`` is the conversion for TRL's keyword arguments.

Example:
    >>> translate({"num_generations": 8, "beta": 0.04, "logging_steps": 5}, lambda key: None)
    ({'n_rollouts': 8, 'kl_loss_coef': 0.04}, [])
    >>> translate({"actor_rollout_ref": {"rollout": {"n": 8}}}, lambda key: None)
    ({'n_rollouts': 8}, [])
    >>> [p["field"] for p in translate({"top_k": 5, "min_p": 0.1}, lambda key: None)[1]]
    ['top_k', 'min_p']
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic_core import PydanticCustomError

from rltune.config._base import Problem, problem
from rltune.config.compat.synonym_kinds import Defaults, Synonym
from rltune.config.compat.trl_names import TRL
from rltune.config.compat.verl_names import SECTIONS, VERL

_log = logging.getLogger(__name__)

#: Every foreign name rltune knows, TRL's ``GRPOConfig`` first, then verl's.
SYNONYMS: tuple[Synonym, ...] = tuple(sorted(
    (*TRL, *VERL), key=lambda s: (s.tool != "TRL", s.refused, s.noop)))

BY_NAME: dict[str, Synonym] = {s.name: s for s in SYNONYMS}
assert len(BY_NAME) == len(SYNONYMS), "a foreign name is listed twice"


def flatten_verl(data: dict[str, Any]) -> dict[str, Any]:
    """verl's nested sections (``actor_rollout_ref: {rollout: {n: 8}}``) as dotted names."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value and f"{prefix}" not in BY_NAME:
            for key, sub in value.items():
                walk(f"{prefix}.{key}", sub)
        else:
            out[prefix] = value

    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            walk(key, value)
        else:
            out[key] = value
    return out


def is_verl_name(key: str) -> bool:
    """A dotted name under one of verl's sections (``trainer.logger``)."""
    return "." in key and key.split(".", 1)[0] in SECTIONS


def _as_problem(exc: PydanticCustomError) -> Problem:
    ctx = exc.context or {}
    return problem(str(ctx.get("field")), ctx.get("value"), str(ctx.get("rule")),
                   str(ctx.get("fix")))


def translate(data: dict[str, Any], defaults: Defaults) -> tuple[dict[str, Any], list[Problem]]:
    """``data`` (a hyper_parameters dict) with every foreign name replaced by rltune's (no-ops
    dropped), and every problem: refused names, verl names rltune lacks, values without an
    equivalent, and two names of one key with different values."""
    data = flatten_verl(data)
    found = [BY_NAME[k] for k in data if k in BY_NAME and BY_NAME[k].target != k]
    foreign = [k for k in data if k not in BY_NAME and is_verl_name(str(k))]
    out_problems = [problem(k, data[k], "is verl's name and rltune has no equivalent",
                            "remove it (docs/coming-from.md lists the verl names rltune maps)")
                    for k in foreign]
    for s in found:
        if s.refused:
            out_problems.append(problem(
                s.name, data[s.name], f"is {s.tool}'s name and has no exact equivalent in "
                f"rltune: {s.why}", f"use {s.target}"))
    gone = {s.name for s in found} | set(foreign)
    out = {k: v for k, v in data.items() if k not in gone}
    origin = {k: k for k in out}
    for s in sorted((s for s in found if not s.refused), key=lambda s: s.derived):
        assert s.convert is not None
        try:
            converted = s.convert(data[s.name], out, defaults)
        except PydanticCustomError as exc:
            out_problems.append(_as_problem(exc))
            continue
        if s.noop:
            _log.info("%s (%s's name) has no effect in rltune: %s", s.name, s.tool, s.why)
        for key, value in converted.items():
            if key in out and out[key] != value:
                out_problems.append(problem(
                    s.name, data[s.name], f"sets {key} to {value!r}, but {origin[key]} sets "
                    f"it to {out[key]!r}", "keep only one of them"))
                continue
            out[key], origin[key] = value, s.name
    return out, out_problems


def trl_to_rltune(kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """TRL's ``GRPOConfig`` keyword arguments as rltune hyper-parameters, and the problems
    (each ``{field, value, rule, fix}``): the conversion a TRL shim makes.

    Example:
        >>> trl_to_rltune({"num_generations": 4, "output_dir": "out", "top_k": 3})[0]
        {'n_rollouts': 4}
    """
    from rltune.config.hyperparams import HyperParameters

    fields = HyperParameters.model_fields
    return translate(dict(kwargs), lambda key: fields[key].default)


def _target(s: Synonym) -> str:
    if s.refused:
        return f"refused: use `{s.target}`"
    if s.noop:
        shown = ", ".join(f"`{v!r}`" if v is not None else "unset" for v in s.harmless)
        return f"no-op ({shown}; else use `{s.target}`)" if s.harmless else "no-op"
    return f"`{s.target}`"


def markdown_table(tool: str) -> str:
    """The docs table of one tool's names (``docs/coming-from.md``)."""
    lines = [f"| {tool} name | rltune | notes |", "| --- | --- | --- |"]
    for s in SYNONYMS:
        if s.tool == tool:
            lines.append(f"| `{s.name}` | {_target(s).replace('|', '/')} | "
                         f"{s.why.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
