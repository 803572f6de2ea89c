"""Turn pydantic validation errors into one ``ConfigError`` that names, for every problem, the
field path, the value, the rule, the fix and (when the config came from YAML) the line.

Example:
    >>> from rltune.config import load_job_config_text
    >>> text = "model: m\\ntraining:\\n  hyper_parameters:\\n    batch_sise: 8\\n"
    >>> try:
    ...     load_job_config_text(text, source="job.yaml")
    ... except Exception as exc:
    ...     print(exc.where, "|", exc.hint)
    job.yaml:4 | did you mean 'batch_size'?
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic import BaseModel

from rltune.config._base import closest
from rltune.sdk.errors import ConfigError

#: Tags pydantic inserts into error locations of the ``functions`` discriminated union.
_UNION_TAGS = {"rollout", "reward", "group_reward"}
_RANGE_TYPES = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for i, part in enumerate(loc):
        if isinstance(part, str) and part in _UNION_TAGS and i and isinstance(loc[i - 1], int):
            continue
        if isinstance(part, str) and part.startswith(("function-", "tagged-union[")):
            continue
        out.append(part)
    return tuple(out)


def format_path(path: tuple[Any, ...]) -> str:
    """``("functions", 0, "timeout")`` → ``functions[0].timeout``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (Optional, list, Annotated, Union of one)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is None:
        return None
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _model_in(args[0])
    candidates = [m for m in (_model_in(a) for a in args) if m is not None]
    if origin in (typing.Union, types.UnionType) or origin in (list, dict):
        return candidates[0] if candidates else None
    return None


def _field_info(root: type[BaseModel], path: tuple[Any, ...]) -> Any:
    """The pydantic FieldInfo at ``path`` below ``root`` (best effort; None if not found)."""
    model: type[BaseModel] | None = root
    info = None
    for part in path:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None
        info = model.model_fields[part]
        model = _model_in(info.annotation)
    return info


def _allowed_range(info: Any) -> str | None:
    if info is None:
        return None
    lo = hi = None
    lo_open = hi_open = False
    for meta in info.metadata:
        for attr, is_lo, is_open in (("ge", 1, 0), ("gt", 1, 1), ("le", 0, 0), ("lt", 0, 1)):
            value = getattr(meta, attr, None)
            if value is not None:
                if is_lo:
                    lo, lo_open = value, bool(is_open)
                else:
                    hi, hi_open = value, bool(is_open)
    if lo is None and hi is None:
        return None
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    return f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"


def _describe_all(err: dict[str, Any], root: type[BaseModel]
                  ) -> list[tuple[tuple[Any, ...], Any, str, str]]:
    """(path, value, rule, fix) of each problem in one pydantic error dict (a ``problems``
    error of ``config._base`` holds several)."""
    ctx = err.get("ctx") or {}
    if err.get("type") != "problems":
        return [_describe(err, root)]
    loc = _clean_loc(tuple(err.get("loc", ())))
    return [((*loc, *str(p["field"]).split(".")), p["value"], p["rule"], p["fix"])
            for p in ctx["problems"]]


def _describe(err: dict[str, Any], root: type[BaseModel]) -> tuple[tuple[Any, ...], Any, str, str]:
    """(path, value, rule, fix) of one pydantic error dict."""
    loc = _clean_loc(tuple(err.get("loc", ())))
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    value = err.get("input")
    msg = str(err.get("msg", "")).removeprefix("Value error, ")
    if kind in ("coupling", "number_expected"):
        # A dotted ``field`` (set by a validator higher up) names a nested path.
        path = (*loc, *str(ctx["field"]).split(".")) if ctx.get("field") else loc
        return path, ctx.get("value"), str(ctx.get("rule", msg)), str(
            ctx.get("fix", "write a number, e.g. 8 or 2e-6")
        )
    if kind in _RANGE_TYPES:
        allowed = _allowed_range(_field_info(root, loc))
        fix = f"use a value in {allowed}" if allowed else "use a value inside the allowed range"
        return loc, value, msg[0].lower() + msg[1:], fix
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected", ""))
        options = [o.strip(" '") for o in expected.replace(" or ", ",").split(",") if o.strip()]
        near = closest(str(value), options) if isinstance(value, str) else None
        fix = f"did you mean '{near}'?" if near else f"use one of: {', '.join(options)}"
        return loc, value, f"must be one of {expected}", fix
    if kind == "missing":
        return loc, None, "required field is missing", f"add '{format_path(loc[-1:])}'"
    if kind in ("int_parsing", "float_parsing", "int_type", "float_type", "int_from_float"):
        return loc, value, msg[0].lower() + msg[1:], "write a number, e.g. 8 or 2e-6"
    if kind == "value_error" and "; " in msg:
        # Our validators write "what is wrong; how to fix it".
        rule, fix = msg.split("; ", 1)
        return loc, value, rule, fix
    return loc, value, msg, "see the field's documentation in `rltune.config`"


def config_error(
    exc: pydantic.ValidationError,
    *,
    root: type[BaseModel],
    prefix: tuple[Any, ...] = (),
    source: str | None = None,
    line_of: Callable[[tuple[Any, ...]], int | None] | None = None,
    label: Callable[[tuple[Any, ...]], str] | None = None,
) -> ConfigError:
    """One ``ConfigError`` for all problems in ``exc``; ``.details`` lists them as dicts.

    ``prefix`` is prepended to paths (e.g. when validating only ``hyper_parameters``);
    ``line_of`` maps a path to its YAML line; ``label`` names a field (default: its path).
    """
    details: list[dict[str, Any]] = []
    for path, value, rule, fix in (d for err in exc.errors() for d in _describe_all(err, root)):
        full = (*prefix, *path)
        line = line_of(full) if line_of else None
        where = f"{source}:{line}" if source and line else source
        details.append(
            {"field": label(full) if label else format_path(full), "value": value,
             "rule": rule, "fix": fix, "line": line, "where": where}
        )

    def one(d: dict[str, Any]) -> str:
        shown = "" if d["value"] is None else f" = {d['value']!r}"
        return f"{d['field']}{shown}: {d['rule']}"

    first = details[0]
    if len(details) == 1:
        error = ConfigError(one(first), where=first["where"], hint=first["fix"])
    else:
        lines = [f"{len(details)} problems in the job config:"]
        for d in details:
            at = f"{d['where']}: " if d["where"] else ""
            lines.append(f"  - {at}{one(d)} (fix: {d['fix']})")
        error = ConfigError("\n".join(lines), where=None, hint=None)
    error.details = details  # type: ignore[attr-defined]
    return error
