"""Shared base of every config model: unknown keys are errors with a "did you mean" hint, and
numbers written as YAML strings (``"2e-6"``, ``"8"``) are accepted.

Why a custom check instead of pydantic's ``extra="forbid"``: pydantic's message says only
"Extra inputs are not permitted"; users need the closest valid key.

Example:
    >>> from rltune.config._base import StrictModel
    >>> class M(StrictModel):
    ...     learning_rate: float = 0.1
    >>> M.model_validate({"learning_rate": "2e-6"}).learning_rate
    2e-06
    >>> M.model_validate({"lerning_rate": 1})
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for M
    ...
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError


def coupling(field: str, value: Any, rule: str, fix: str) -> PydanticCustomError:
    """A broken rule between keys, reported against ``field`` (a dotted path below the model
    that raises it) with its value, the rule and the fix (``rltune.config.errors`` formats it)."""
    return PydanticCustomError(
        "coupling", "{rule}", {"field": field, "value": value, "rule": rule, "fix": fix}
    )


#: One problem of a config: ``field`` (a dotted path below the model), ``value``, ``rule``, ``fix``.
Problem = dict[str, Any]


def problem(field: str, value: Any, rule: str, fix: str) -> Problem:
    return {"field": field, "value": value, "rule": rule, "fix": fix}


def problems(found: list[Problem]) -> PydanticCustomError:
    """Every problem of one mapping as one error (``rltune.config.errors`` lists each)."""
    summary = "; ".join(f"{p['field']}: {p['rule']} ({p['fix']})" for p in found)
    return PydanticCustomError("problems", "{summary}", {"summary": summary,
                                                          "problems": found})


def closest(name: str, candidates: typing.Iterable[str]) -> str | None:
    """The candidate closest to ``name`` (for "did you mean" hints), or None if none is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _scalar_kind(annotation: Any) -> type | None:
    """``int`` or ``float`` if the annotation is (an Optional of) that type, else None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _scalar_kind(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        kinds = {_scalar_kind(a) for a in typing.get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if annotation is int or annotation is float:
        return annotation
    return None


def coerce_number(value: Any, kind: type) -> Any:
    """Turn a YAML string such as ``"2e-6"`` or ``"1e3"`` into a number of ``kind``.

    PyYAML reads ``2e-6`` (no dot) as a string, and cloud SDK job files send strings, so a
    numeric string is accepted. Booleans are refused: ``true`` for a batch size is a mistake.
    Anything else is returned unchanged for pydantic to judge.
    """
    if isinstance(value, bool):
        raise PydanticCustomError(
            "number_expected", "expected a number, not a boolean", {"value": value}
        )
    if isinstance(value, str):
        try:
            number = float(value.strip().replace("_", ""))
        except ValueError:
            return value
        if kind is int:
            return int(number) if number.is_integer() else value
        return number
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class StrictModel(BaseModel):
    """Base config model: unknown keys rejected with a hint; numeric strings accepted."""

    model_config = ConfigDict(validate_assignment=True, populate_by_name=True)

    #: Keys accepted on input besides the field names (e.g. aliases of the documented shape).
    _extra_input_keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _normalize_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Hook for subclasses: rewrite another accepted input shape into the canonical one."""
        return data

    @classmethod
    def _normalize_problems(cls, data: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
        """Hook for subclasses whose rewrite finds several problems at once (reported with the
        unknown keys in one error); the default is ``_normalize_input`` and none."""
        return cls._normalize_input(data), []

    @classmethod
    def _unknown_hint(cls, key: str) -> str | None:
        """Hook for subclasses: the fix for an unknown ``key`` better than "did you mean"."""
        return None

    @model_validator(mode="before")
    @classmethod
    def _strict_input(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data, found = cls._normalize_problems(dict(data))
        known = set(cls.model_fields) | {
            f.alias for f in cls.model_fields.values() if f.alias
        } | set(cls._extra_input_keys)
        for key in (k for k in data if k not in known):
            suggestion = closest(str(key), sorted(known))
            hint = cls._unknown_hint(str(key)) or (
                f"did you mean '{suggestion}'?" if suggestion
                else "allowed keys: " + ", ".join(sorted(known)))
            found.append(problem(str(key), data[key], "unknown key", hint))
        for name, field in cls.model_fields.items():
            kind = _scalar_kind(field.annotation)
            key = name if name in data else field.alias
            if kind is not None and key in data:
                if isinstance(data[key], bool):
                    found.append(problem(key, data[key], "expected a number, not a boolean",
                                         "write a number, e.g. 8 or 2e-6"))
                    continue
                data[key] = coerce_number(data[key], kind)
        if found:
            raise problems(found)
        return data
