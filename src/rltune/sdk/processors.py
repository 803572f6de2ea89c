"""Processor base classes: subclass one, implement ``process`` (sync or async).

The worker instantiates the class once with no arguments, calls ``setup()`` once (sync or
async), then ``process()`` per request: ``async def`` runs on the event loop, ``def`` in a
thread pool.

Example:
    >>> import asyncio
    >>> from rltune.sdk import AbstractRewardProcessor, RewardInput, RewardOutput, Reward
    >>> class Exact(AbstractRewardProcessor):
    ...     def process(self, input_data: RewardInput) -> RewardOutput:
    ...         answer = input_data.agent_output.messages[-1]["content"]
    ...         ok = answer == input_data.ground_truth
    ...         return RewardOutput(reward=Reward(reward_score=float(ok)))
    >>> out = asyncio.run(call_process(Exact(), RewardInput(ground_truth="5",
    ...     agent_output={"messages": [{"role": "assistant", "content": "5"}]})))
    >>> out.reward.reward_score
    1.0
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from rltune.sdk.data import (
    FunctionType,
    GroupRewardInput,
    GroupRewardOutput,
    RewardInput,
    RewardOutput,
    RolloutInput,
    RolloutOutput,
)


class AbstractProcessor(ABC):
    """Base of every user function. ``func_type`` says which wire models it speaks."""

    func_type: FunctionType | None = None

    def setup(self) -> None:  # noqa: B027 - optional hook, intentionally empty
        """Called once per worker before the first request (may be ``async def``)."""

    @abstractmethod
    def process(self, input_data: Any) -> Any:
        """Handle one request (``def`` or ``async def``: workers await a coroutine)."""


class AbstractRolloutProcessor(AbstractProcessor):
    func_type = FunctionType.ROLLOUT

    @abstractmethod
    async def process(self, input_data: RolloutInput) -> RolloutOutput: ...


class AbstractGroupRewardProcessor(AbstractProcessor):
    func_type = FunctionType.GROUP_REWARD

    @abstractmethod
    def process(self, input_data: GroupRewardInput
                ) -> GroupRewardOutput | Awaitable[GroupRewardOutput]: ...


class AbstractRewardProcessor(AbstractProcessor):
    """Reward base. With ``@reward_func`` the class only defines ``@sub_reward_func`` methods.

    Sync sub-rewards run in ``executor`` (one is created when not given); subclasses that define
    ``__init__`` must call ``super().__init__()``.
    """

    func_type = FunctionType.REWARD

    def __init__(self, executor: Executor | None = None):
        self._owns_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(thread_name_prefix="rltune-reward")
        from rltune.sdk.rewards import collect_reward_functions

        self._sub_funcs, self._aggregate = collect_reward_functions(type(self))

    @abstractmethod
    def process(self, input_data: RewardInput) -> RewardOutput | Awaitable[RewardOutput]: ...

    # The helpers below are the cloud SDK's public API for custom aggregate functions.
    def get_weights(self) -> dict[str, float]:
        return {name: spec.sub_weight for name, spec in self._sub_funcs.items()}

    def get_scores(self, sub_rewards: dict[str, RewardOutput]) -> dict[str, float]:
        return {name: out.reward.reward_score for name, out in sub_rewards.items()}

    def get_total(self, sub_rewards: dict[str, RewardOutput]) -> float:
        weights = self.get_weights()
        total = 0.0
        for name, out in sub_rewards.items():
            if name not in weights:
                raise ValueError(
                    f"sub reward {name!r} is not registered on {type(self).__name__}; "
                    f"registered: {sorted(weights)}"
                )
            total += out.reward.reward_score * weights[name]
        return total

    def get_reward_metrics(self, sub_rewards: dict[str, RewardOutput]) -> dict[str, float]:
        merged: dict[str, float] = {}
        for name, out in sub_rewards.items():
            for key, value in (out.reward.reward_metrics or {}).items():
                merged[f"{name}.{key}"] = value
        return merged

    def shutdown(self) -> None:
        if getattr(self, "_owns_executor", False):
            self._executor.shutdown(wait=False)

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass


async def maybe_await_in_thread(fn: Any, *args: Any, executor: Executor | None = None) -> Any:
    """Await ``fn(*args)`` if it is a coroutine function, else run it in a thread.

    Context variables are copied into the thread, so tracing context follows the call.
    """
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    result = await loop.run_in_executor(executor, functools.partial(ctx.run, fn, *args))
    if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
        result = await result
    return result


async def call_setup(processor: AbstractProcessor, executor: Executor | None = None) -> None:
    """Run ``processor.setup()`` once, whether it is sync or async."""
    await maybe_await_in_thread(processor.setup, executor=executor)


async def call_process(
    processor: AbstractProcessor, input_data: Any, executor: Executor | None = None
) -> Any:
    """Run ``processor.process(input_data)``, whether it is sync or async."""
    return await maybe_await_in_thread(processor.process, input_data, executor=executor)


__all__ = [
    "AbstractGroupRewardProcessor",
    "AbstractProcessor",
    "AbstractRewardProcessor",
    "AbstractRolloutProcessor",
    "call_process",
    "call_setup",
]
