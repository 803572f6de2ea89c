"""Tool spans: ``trace_tool`` patches a tool object's methods, ``observe_tool`` decorates a
function; each call is an ``execute_tool`` span with its arguments and result."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Optional

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from rltune.sdk.tracing.core import (
    _PATCHED,
    _set_ids_from_baggage,
    _tracer,
    preview,
)


def _tool_span(name: str, provider: Optional[str], arguments: Any) -> Any:
    span = _tracer().start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL)
    span.set_attribute("gen_ai.span.kind", "TOOL")
    span.set_attribute("gen_ai.operation.name", "execute_tool")
    span.set_attribute("gen_ai.tool.name", name)
    if provider:
        span.set_attribute("gen_ai.tool.provider", provider)
    span.set_attribute("tool_call_arguments", preview(arguments))
    _set_ids_from_baggage(span)
    return span


def _wrap_tool_method(method: Callable[..., Any], name: str, provider: Optional[str]) -> Any:
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def async_call(tool_input: Any, *args: Any, **kwargs: Any) -> Any:
            span = _tool_span(name, provider, tool_input)
            with trace.use_span(
                span, end_on_exit=True, record_exception=True, set_status_on_exception=True
            ):
                result = await method(tool_input, *args, **kwargs)
                span.set_attribute("tool_call_result", preview(result))
                return result

        setattr(async_call, _PATCHED, True)
        return async_call

    @functools.wraps(method)
    def call(tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        span = _tool_span(name, provider, tool_input)
        with trace.use_span(
            span, end_on_exit=True, record_exception=True, set_status_on_exception=True
        ):
            result = method(tool_input, *args, **kwargs)
            span.set_attribute("tool_call_result", preview(result))
            return result

    setattr(call, _PATCHED, True)
    return call


def trace_tool(tools: Any, provider: Optional[str] = None) -> Any:
    """Trace ``invoke``/``ainvoke`` of LangChain-style tools; returns ``tools`` unchanged.

    Accepts one tool, a list/tuple, a dict of tools, or a LangGraph ``ToolNode``.
    """
    if hasattr(tools, "tools_by_name"):
        items = list(tools.tools_by_name.values())
    elif isinstance(tools, dict):
        items = list(tools.values())
    elif isinstance(tools, (list, tuple)):
        items = list(tools)
    else:
        items = [tools]
    for tool in items:
        name = str(getattr(tool, "name", type(tool).__name__))
        tool_provider = provider or ("mcp" if "mcp" in type(tool).__module__ else None)
        for attr in ("invoke", "ainvoke"):
            method = getattr(tool, attr, None)
            if method is None or getattr(method, _PATCHED, False):
                continue
            wrapped = _wrap_tool_method(method, name, tool_provider)
            try:
                object.__setattr__(tool, attr, wrapped)
            except (AttributeError, TypeError):
                pass
    return tools


def observe_tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    provider: Optional[str] = None,
    handler: Any = None,
) -> Any:
    """Decorate a plain tool function with an ``execute_tool`` span (sync or async)."""
    del handler

    def decorate(func: Callable[..., Any]) -> Any:
        sig = inspect.signature(func)
        tool_name = name or func.__name__

        def bound_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return {"args": args, "kwargs": kwargs}
            return {k: v for k, v in bound.arguments.items() if k not in ("self", "cls")}

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_call(*args: Any, **kwargs: Any) -> Any:
                span = _tool_span(tool_name, provider, bound_args(args, kwargs))
                with trace.use_span(
                    span, end_on_exit=True, record_exception=True, set_status_on_exception=True
                ):
                    result = await func(*args, **kwargs)
                    span.set_attribute("tool_call_result", preview(result))
                    return result

            return async_call

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            span = _tool_span(tool_name, provider, bound_args(args, kwargs))
            with trace.use_span(
                span, end_on_exit=True, record_exception=True, set_status_on_exception=True
            ):
                result = func(*args, **kwargs)
                span.set_attribute("tool_call_result", preview(result))
                return result

        return call

    return decorate(fn) if fn is not None else decorate
