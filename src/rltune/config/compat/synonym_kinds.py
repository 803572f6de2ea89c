"""The kinds of entries of the foreign-name table (``config/compat/synonyms.py``) and the
conversions they use: a synonym (renamed, the value converted where the units differ), a no-op
(accepted and dropped, for every value or only the harmless ones, with the reason), a refusal
(names the rltune key to use and why there is no equivalent).

Example:
    >>> syn = noop("logging_steps", "TRL", "rltune logs every step's metrics")
    >>> syn.convert(10, {}, lambda key: None), syn.refused
    ({}, False)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from rltune.config._base import coupling

#: ``defaults(key)``: the value a hyper-parameter has when the config does not set it.
Defaults = Callable[[str], Any]
#: ``(value, config so far, defaults) → {rltune key: value}``.
Convert = Callable[[Any, dict[str, Any], Defaults], dict[str, Any]]


@dataclass(frozen=True)
class Synonym:
    """One foreign name: ``target`` is the rltune key it sets (or, refused, the one to use)."""

    name: str
    tool: str  # "TRL" (GRPOConfig) or "verl"
    target: str
    #: None: refused (``why`` says why); else the conversion.
    convert: Optional[Convert]
    why: str = ""
    #: Reads other keys (max_prompt_length, n_rollouts): applied after the plain renames.
    derived: bool = False
    #: Accepted without effect (``harmless``: the values accepted; empty = every value).
    noop: bool = False
    harmless: tuple[Any, ...] = ()

    @property
    def refused(self) -> bool:
        return self.convert is None


def same(target: str) -> Convert:
    return lambda value, data, defaults: {target: value}


def choice(target: str, values: dict[Any, Any], name: str) -> Convert:
    def convert(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
        key = value.lower() if isinstance(value, str) else value
        if key not in values:
            raise coupling(name, value, f"rltune supports {name} "
                           f"{', '.join(map(str, values))} here",
                           f"set {target} instead (rltune's own values)")
        return {target: values[key]} if values[key] is not None else {}
    return convert


def syn(name: str, tool: str, target: str, convert: Optional[Convert] = None,
        why: str = "", derived: bool = False) -> Synonym:
    return Synonym(name, tool, target, convert if convert is not None else same(target),
                   why, derived)


def no(name: str, tool: str, target: str, why: str) -> Synonym:
    return Synonym(name, tool, target, None, why)


def noop(name: str, tool: str, why: str, harmless: tuple[Any, ...] = (),
         target: str = "(none)") -> Synonym:
    """Accepted and dropped: any value, or only ``harmless`` ones (another is refused naming
    ``target``)."""
    def convert(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
        shown = ", ".join(repr(v) for v in harmless)
        one = value[0] if isinstance(value, list) and len(value) == 1 else value
        empty = isinstance(value, (list, dict)) and not value and None in harmless
        if harmless and one not in harmless and not empty:
            raise coupling(name, value, f"is {tool}'s name; rltune has no equivalent of "
                           f"{value!r}: {why}",
                           f"use {target}" if target != "(none)" else f"remove {name} "
                           f"(accepted as a no-op only as {shown})")
        return {}
    return Synonym(name, tool, target, convert, why, noop=True, harmless=harmless)


UNSET_PROMPT = "(an unset max_prompt_length is 1024, or what the model's context leaves)"


def plus_prompt(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """max_completion_length / max_response_length: rltune's max_length is prompt + response."""
    prompt = data.get("max_prompt_length", defaults("max_prompt_length"))
    return {"max_length": int(prompt) + int(value)}


def times_n(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """verl's ppo_mini_batch_size counts prompts; rltune's counts rollouts."""
    n = data.get("n_rollouts", defaults("n_rollouts"))
    return {"ppo_mini_batch_size": int(value) * int(n)}


def both_clips(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """TRL's epsilon (and verl's clip_ratio) is the lower bound, and the upper one unless
    epsilon_high / clip_ratio_high is set."""
    out = {"clip_ratio_low": value}
    if "clip_ratio_high" not in data:  # plain renames (epsilon_high) are applied first
        out["clip_ratio_high"] = value
    return out


#: TRL's per_device_train_batch_size when a config does not set it (TrainingArguments').
TRL_DEVICE_BATCH = 8


def accumulated(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """TRL's gradient_accumulation_steps: per_device_train_batch_size (micro_batch_size) x
    it completions make one optimizer update, rltune's ppo_mini_batch_size."""
    micro = data.get("micro_batch_size") or TRL_DEVICE_BATCH
    return {"ppo_mini_batch_size": int(value) * int(micro)}


def per_prompt(value: Any, data: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """TRL's generation_batch_size counts completions; rltune's batch_size counts prompts."""
    n = int(data.get("n_rollouts", defaults("n_rollouts")))
    if int(value) % n:
        raise coupling("generation_batch_size", value,
                       f"counts completions and must be a multiple of n_rollouts ({n})",
                       f"set batch_size (prompts per step) to {max(1, int(value) // n)}")
    return {"batch_size": int(value) // n}
