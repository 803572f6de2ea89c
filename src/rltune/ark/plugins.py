"""Ark's plugin decorators ``@rollout``, ``@single_grader`` and ``@group_grader``.

A decorated function stays callable the way Ark documents it (always awaitable: a sync
function runs in a thread), and carries an rltune processor class in
``__rltune_processor__``: that is what a function worker serves when a job names the plugin as
``module:function``. The adapters in :mod:`rltune.ark.adapters` translate between rltune's
wire models and Ark's arguments.

Example:
    >>> import asyncio
    >>> @single_grader(name="exact")
    ... def exact(context, sample, trajectory):
    ...     return float(trajectory.messages[-1].content == sample.extra["answer"])
    >>> exact.__ark_plugin__.kind, exact.__rltune_processor__.func_type.value
    ('single_grader', 'reward')
    >>> from rltune.ark.types import ChatCompletionSample, Trajectory
    >>> s = ChatCompletionSample(messages=[{"role": "user", "content": "1+1"}],
    ...                          extra={"answer": "2"})
    >>> asyncio.run(exact({}, s, Trajectory(messages=[{"role": "assistant", "content": "2"}])))
    1.0
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from rltune.ark.types import Runtime
from rltune.sdk.errors import UserCodeError

#: Parameters each plugin kind must accept, in order (Ark validates them at submit).
SIGNATURES = {
    "rollout": ("context", "proxy", "sample"),
    "single_grader": ("context", "sample", "trajectory"),
    "group_grader": ("context", "sample", "trajectories"),
}


@dataclass(frozen=True)
class PluginSpec:
    """What a decorator recorded about a plugin."""

    kind: str
    name: str
    description: str
    runtime: Runtime
    func: Callable[..., Any]

    async def call(self, *args: Any) -> Any:
        """Run the user's function: awaited if async, else in a thread (context copied)."""
        if inspect.iscoroutinefunction(self.func):
            return await self.func(*args)
        ctx = contextvars.copy_context()
        result = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(ctx.run, self.func, *args))
        return await result if inspect.isawaitable(result) else result


def _check_signature(kind: str, func: Callable[..., Any]) -> None:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    want = SIGNATURES[kind]
    if len(positional) < len(want) or any(
        p.default is inspect.Parameter.empty for p in positional[len(want):]
    ):
        got = ", ".join(p.name for p in positional) or "nothing"
        raise UserCodeError(
            f"@{kind} plugin {func.__qualname__} takes ({got}); Ark calls it with "
            f"({', '.join(want)})",
            where=f"{func.__module__}.{func.__qualname__}",
            hint=f"define it as def {func.__name__}({', '.join(want)}): ...",
        )


def _decorator(kind: str) -> Callable[..., Any]:
    def make(func: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None,
             description: str = "", runtime: Optional[Runtime] = None) -> Any:
        def wrap(fn: Callable[..., Any]) -> Any:
            _check_signature(kind, fn)
            spec = PluginSpec(kind=kind, name=name or fn.__name__, description=description,
                              runtime=runtime or Runtime(), func=fn)

            @functools.wraps(fn)
            async def plugin(*args: Any, **kwargs: Any) -> Any:
                if kwargs:
                    bound = inspect.signature(fn).bind(*args, **kwargs)
                    args = tuple(bound.arguments.values())
                return await spec.call(*args)

            from rltune.ark.adapters import processor_for

            plugin.__ark_plugin__ = spec  # type: ignore[attr-defined]
            plugin.__rltune_processor__ = processor_for(spec)  # type: ignore[attr-defined]
            return plugin

        return wrap(func) if func is not None else wrap

    make.__name__ = kind
    make.__doc__ = (f"Mark a function as an Ark ``{kind}`` plugin; use as ``@{kind}`` or "
                    f"``@{kind}(name=..., description=..., runtime=Runtime(...))``.")
    return make


rollout = _decorator("rollout")
single_grader = _decorator("single_grader")
group_grader = _decorator("group_grader")


def plugin_spec(obj: Any) -> PluginSpec:
    """The :class:`PluginSpec` of a decorated function, or a clear error."""
    spec = getattr(obj, "__ark_plugin__", None)
    if not isinstance(spec, PluginSpec):
        raise UserCodeError(
            f"{getattr(obj, '__qualname__', obj)!r} is not an Ark plugin",
            hint="decorate it with @rollout, @single_grader or @group_grader",
        )
    return spec
