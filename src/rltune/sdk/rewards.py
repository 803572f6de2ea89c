"""Reward decorators: compose a reward from weighted sub-rewards.

``@reward_func`` generates ``process``: every ``@sub_reward_func`` method runs (async ones
concurrently on the loop, sync ones in the processor's thread pool); a sub-reward that raises
scores 0 with status FAILED and the others go on; an ``@aggregate_func`` method, if present,
makes the result, else the result is the plain weighted sum Σ score·sub_weight (not normalised).

Example:
    >>> import asyncio
    >>> from rltune.sdk import (AbstractRewardProcessor, RewardInput, RewardOutput, Reward,
    ...     reward_func, sub_reward_func)
    >>> @reward_func("calc")
    ... class Calc(AbstractRewardProcessor):
    ...     @sub_reward_func("format", 0.5)
    ...     def fmt(self, inp):
    ...         return RewardOutput(reward=Reward(reward_score=1.0))
    ...     @sub_reward_func(sub_weight=2.0)
    ...     async def exact(self, inp):
    ...         return RewardOutput(reward=Reward(reward_score=0.25))
    >>> out = asyncio.run(Calc().process(RewardInput(agent_output={"messages": []})))
    >>> out.reward.reward_score
    1.0
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from rltune.sdk.data import Reward, RewardOutput, TaskStatus

_SUB_ATTR = "__rltune_sub_reward__"
_AGG_ATTR = "__rltune_aggregate__"


@dataclass(frozen=True)
class RewardProcessorMeta:
    """Class-level marker that ``@reward_func`` attaches (``cls.reward_meta``)."""

    processor_id: str


@dataclass(frozen=True)
class SubRewardSpec:
    name: str
    sub_weight: float
    attr: str


def sub_reward_func(
    name: Optional[str | Callable[..., Any]] = None, sub_weight: float = 1.0
) -> Any:
    """Mark a method ``(self, input: RewardInput) -> RewardOutput`` as a weighted sub-reward.

    Usable as ``@sub_reward_func``, ``@sub_reward_func("format", 0.3)`` or
    ``@sub_reward_func(name="format", sub_weight=0.3)``; the name defaults to the method name.
    """
    if callable(name):  # bare decorator
        setattr(name, _SUB_ATTR, (None, 1.0))
        return name

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _SUB_ATTR, (name, float(sub_weight)))
        return fn

    return mark


def aggregate_func(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``(self, sub_rewards: dict[str, RewardOutput]) -> RewardOutput`` as the combiner."""
    setattr(fn, _AGG_ATTR, True)
    return fn


def collect_reward_functions(cls: type) -> tuple[dict[str, SubRewardSpec], Optional[str]]:
    """Find decorated methods, alphabetically by attribute name (as the cloud SDK does)."""
    subs: dict[str, SubRewardSpec] = {}
    aggregate: Optional[str] = None
    for attr in dir(cls):
        member = getattr(cls, attr, None)
        if member is None:
            continue
        marker = getattr(member, _SUB_ATTR, None)
        if marker is not None:
            name = marker[0] or attr
            if name in subs:
                raise TypeError(
                    f"{cls.__name__}: two sub-rewards are named {name!r} "
                    f"({subs[name].attr} and {attr}); give each a distinct name"
                )
            subs[name] = SubRewardSpec(name=name, sub_weight=marker[1], attr=attr)
        if getattr(member, _AGG_ATTR, False):
            if aggregate is not None:
                raise TypeError(
                    f"{cls.__name__}: more than one @aggregate_func ({aggregate}, {attr})"
                )
            aggregate = attr
    return subs, aggregate


def _as_reward_output(value: Any, where: str) -> RewardOutput:
    if isinstance(value, RewardOutput):
        return value
    if isinstance(value, Reward):
        return RewardOutput(reward=value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return RewardOutput(reward=Reward(reward_score=float(value)))
    if isinstance(value, dict):
        return RewardOutput.model_validate(value)
    raise TypeError(f"{where} returned {type(value).__name__}; return a RewardOutput")


def _failed(exc: BaseException) -> RewardOutput:
    return RewardOutput(
        reward=Reward(reward_score=0.0, reward_metrics={}),
        status=TaskStatus.FAILED,
        error=f"{type(exc).__name__}: {exc}",
    )


async def run_sub_rewards(processor: Any, input_data: Any) -> dict[str, RewardOutput]:
    """Run every sub-reward of ``processor`` concurrently; failures become FAILED outputs."""
    loop = asyncio.get_running_loop()

    async def one(spec: SubRewardSpec) -> RewardOutput:
        fn = getattr(processor, spec.attr)
        where = f"{type(processor).__name__}.{spec.attr}"
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(input_data)
            else:
                value = await loop.run_in_executor(processor._executor, fn, input_data)
                if inspect.isawaitable(value):
                    value = await value
            return _as_reward_output(value, where)
        except Exception as exc:  # a failing sub-reward must not sink the others
            return _failed(exc)

    specs = list(processor._sub_funcs.values())
    results = await asyncio.gather(*(one(s) for s in specs))
    return {spec.name: result for spec, result in zip(specs, results, strict=True)}


async def _generated_process(self: Any, input_data: Any) -> RewardOutput:
    sub_rewards = await run_sub_rewards(self, input_data)
    if self._aggregate is not None:
        agg = getattr(self, self._aggregate)
        value = agg(sub_rewards)
        if inspect.isawaitable(value):
            value = await value
        return _as_reward_output(value, f"{type(self).__name__}.{self._aggregate}")
    return RewardOutput(reward=Reward(reward_score=self.get_total(sub_rewards)))


def reward_func(processor_id: str) -> Callable[[type], type]:
    """Class decorator: generate ``process`` from the class's sub-reward methods."""

    def decorate(cls: type) -> type:
        setattr(cls, "reward_meta", RewardProcessorMeta(processor_id))  # noqa: B010
        setattr(cls, "process", _generated_process)  # noqa: B010
        abstract = set(getattr(cls, "__abstractmethods__", frozenset()))
        abstract.discard("process")
        setattr(cls, "__abstractmethods__", frozenset(abstract))  # noqa: B010
        return cls

    return decorate


__all__ = ["RewardProcessorMeta", "aggregate_func", "reward_func", "sub_reward_func"]
