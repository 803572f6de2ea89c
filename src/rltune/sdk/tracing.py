"""OpenTelemetry instrumentation for user functions (the cloud SDK's observability names).

Spans go through ``opentelemetry-api``: with no tracer provider configured they are no-ops, as
OpenTelemetry defines; configure one (e.g. ``opentelemetry-sdk`` with an OTLP exporter) to
record them. Span names and attributes follow the cloud SDK so existing dashboards keep working.

Example:
    >>> from rltune.sdk.tracing import observe_tool, rollout_context
    >>> @observe_tool(name="calculator")
    ... def calc(expression: str) -> str:
    ...     return str(eval(expression, {"__builtins__": {}}))
    >>> with rollout_context("ro-1", "s-1", "a-1"):
    ...     calc("2+3")
    '5'
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, Optional

from opentelemetry import baggage, context, propagate, trace
from opentelemetry.trace import SpanKind

TRACER_NAME = "rltune"
MAX_PREVIEW_BYTES = 128 * 1024
BAGGAGE_KEYS = {
    "rollout_id": "bailian.agentic_rl.rollout_id",
    "sample_id": "bailian.agentic_rl.sample_id",
    "attempt_id": "bailian.agentic_rl.attempt_id",
}
_PATCHED = "__rltune_traced__"


def _tracer() -> trace.Tracer:
    # Looked up per call: the proxy tracer follows a provider configured after import.
    return trace.get_tracer(TRACER_NAME)


def preview(value: Any) -> str:
    """A JSON preview of ``value`` for span attributes; secrets stay masked, size is capped."""
    try:
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        text = json.dumps(value, default=str, ensure_ascii=False)
    except Exception:
        text = repr(value)
    if len(text.encode()) > MAX_PREVIEW_BYTES:
        text = text.encode()[:MAX_PREVIEW_BYTES].decode(errors="ignore") + "…"
    return text


def _set_ids_from_baggage(span: trace.Span) -> None:
    for key, attr in BAGGAGE_KEYS.items():
        value = baggage.get_baggage(key)
        if value is not None:
            span.set_attribute(attr, str(value))


@contextlib.contextmanager
def rollout_context(
    rollout_id: Optional[str] = None,
    sample_id: Optional[str] = None,
    attempt_id: Optional[str] = None,
) -> Iterator[None]:
    """Put the rollout ids into W3C baggage so every span inside carries them."""
    ctx = context.get_current()
    for key, value in (
        ("rollout_id", rollout_id),
        ("sample_id", sample_id),
        ("attempt_id", attempt_id),
    ):
        if value is not None:
            ctx = baggage.set_baggage(key, str(value), context=ctx)
    token = context.attach(ctx)
    try:
        yield
    finally:
        context.detach(token)


def _record_result(span: trace.Span, result: Any, capture_io: bool) -> None:
    if capture_io:
        span.set_attribute("output.value", preview(result))
    status = getattr(result, "status", None)
    if status is not None:
        span.set_attribute("agentic_rl.result.status", getattr(status, "value", str(status)))
    reward = getattr(result, "reward", None)
    score = getattr(reward, "reward_score", None)
    if isinstance(score, (int, float)):
        span.set_attribute("agentic_rl.result.reward_score", float(score))
    latency = getattr(result, "latency", None)
    if isinstance(latency, (int, float)):
        span.set_attribute("agentic_rl.result.latency_s", float(latency))


def observe_processor(
    fn: Optional[Callable[..., Any]] = None,
    *,
    otel_span_kind: SpanKind = SpanKind.INTERNAL,
    capture_io_attributes: bool = True,
) -> Any:
    """Decorate a processor's ``process`` (sync or async) with an ``invoke_<type>`` span."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        def start(self: Any, input_data: Any) -> Any:
            func_type = getattr(getattr(self, "func_type", None), "value", None) or getattr(
                getattr(input_data, "func_type", None), "value", "rollout"
            )
            prefix = "invoke_rollout" if func_type == "rollout" else "invoke_reward"
            span = _tracer().start_span(f"{prefix} {type(self).__name__}", kind=otel_span_kind)
            span.set_attribute("gen_ai.span.kind", str(func_type).upper())
            span.set_attribute("operation.name", prefix)
            _set_ids_from_baggage(span)
            meta = getattr(input_data, "request_metadata", None)
            for key, attr in BAGGAGE_KEYS.items():
                if meta is not None and getattr(meta, key, None):
                    span.set_attribute(attr, getattr(meta, key))
            if capture_io_attributes:
                span.set_attribute("input.value", preview(input_data))
            return span

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(self: Any, input_data: Any, *a: Any, **kw: Any) -> Any:
                span = start(self, input_data)
                with trace.use_span(
                    span, end_on_exit=True, record_exception=True, set_status_on_exception=True
                ):
                    result = await func(self, input_data, *a, **kw)
                    _record_result(span, result, capture_io_attributes)
                    return result

            return async_wrapper

        @functools.wraps(func)
        def sync_wrapper(self: Any, input_data: Any, *a: Any, **kw: Any) -> Any:
            span = start(self, input_data)
            with trace.use_span(
                span, end_on_exit=True, record_exception=True, set_status_on_exception=True
            ):
                result = func(self, input_data, *a, **kw)
                _record_result(span, result, capture_io_attributes)
                return result

        return sync_wrapper

    return decorate(fn) if fn is not None else decorate


# --------------------------------------------------------------------------- LLM spans


def _llm_span_start(provider: str, model: Any, messages: Any, params: dict[str, Any]) -> Any:
    span = _tracer().start_span(f"chat {model or ''}".strip(), kind=SpanKind.CLIENT)
    span.set_attribute("gen_ai.span.kind", "LLM")
    span.set_attribute("gen_ai.operation.name", "chat")
    span.set_attribute("gen_ai.provider.name", provider)
    if model:
        span.set_attribute("gen_ai.request.model", str(model))
    if messages is not None:
        span.set_attribute("gen_ai.input.messages", preview(messages))
    for key in (
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "frequency_penalty",
        "presence_penalty",
    ):
        value = params.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            span.set_attribute(f"gen_ai.request.{key}", value)
    if params.get("stop") is not None:
        span.set_attribute("gen_ai.request.stop_sequences", preview(params["stop"]))
    _set_ids_from_baggage(span)
    return span


def _llm_span_result(span: Any, result: Any) -> None:
    """Record an OpenAI-style completion (or anything with the same attributes)."""
    if result is None or inspect.isasyncgen(result) or inspect.isgenerator(result):
        return
    for attr, key in (("model", "gen_ai.response.model"), ("id", "gen_ai.response.id")):
        value = getattr(result, attr, None)
        if isinstance(value, str):
            span.set_attribute(key, value)
    usage = getattr(result, "usage", None)
    for attr, key in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
    ):
        value = getattr(usage, attr, None)
        if isinstance(value, int):
            span.set_attribute(key, value)
    choices = getattr(result, "choices", None)
    if choices:
        out = []
        for choice in choices:
            msg = getattr(choice, "message", None)
            out.append(msg.model_dump() if hasattr(msg, "model_dump") else str(msg))
            reason = getattr(choice, "finish_reason", None)
            if reason:
                span.set_attribute("gen_ai.response.finish_reasons", str(reason))
        span.set_attribute("gen_ai.output.messages", preview(out))


def _with_trace_headers(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` plus ``extra_headers`` carrying the current span (an OpenAI-style call), so
    the model server's spans join this trace."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return kwargs
    return {**kwargs, "extra_headers": {**(kwargs.get("extra_headers") or {}), **carrier}}


def _wrap_llm_callable(
    fn: Callable[..., Any],
    provider: str,
    model_arg: str = "model",
    messages_arg: str = "messages",
    result_mapper: Optional[Callable[[Any], Any]] = None,
    inject_headers: bool = False,
) -> Any:
    def begin(kwargs: dict[str, Any]) -> Any:
        return _llm_span_start(provider, kwargs.get(model_arg), kwargs.get(messages_arg), kwargs)

    def headers(span: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        return _with_trace_headers(kwargs) if inject_headers and span.is_recording() else kwargs

    def finish(span: Any, result: Any) -> None:
        _llm_span_result(span, result_mapper(result) if result_mapper else result)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_call(*args: Any, **kwargs: Any) -> Any:
            span = begin(kwargs)
            with trace.use_span(
                span, end_on_exit=True, record_exception=True, set_status_on_exception=True
            ):
                result = await fn(*args, **headers(span, kwargs))
                finish(span, result)
                return result

        setattr(async_call, _PATCHED, True)
        return async_call

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        span = begin(kwargs)
        # Not end_on_exit: an async client hidden behind a sync wrapper returns a coroutine,
        # and its span must stay open until that coroutine is awaited.
        with trace.use_span(
            span, end_on_exit=False, record_exception=True, set_status_on_exception=True
        ):
            try:
                result = fn(*args, **headers(span, kwargs))
            except BaseException:
                span.end()
                raise
        if inspect.isawaitable(result):
            return _await_and_finish(span, result, finish)
        finish(span, result)
        span.end()
        return result

    setattr(call, _PATCHED, True)
    return call


async def _await_and_finish(span: Any, awaitable: Any, finish: Callable[..., None]) -> Any:
    with trace.use_span(
        span, end_on_exit=True, record_exception=True, set_status_on_exception=True
    ):
        result = await awaitable
        finish(span, result)
        return result


def _takes_extra_headers(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "extra_headers" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _patch_create(owner: Any, provider: str) -> bool:
    create = getattr(owner, "create", None)
    if create is None:
        return False
    if not getattr(create, _PATCHED, False):
        try:
            # An OpenAI-style create takes extra_headers: send the trace context with it.
            owner.create = _wrap_llm_callable(create, provider,
                                              inject_headers=_takes_extra_headers(create))
        except (AttributeError, TypeError):
            return False
    return True


def trace_client(client: Any, provider: str = "openai") -> Any:
    """Record an LLM span for every chat call of ``client``; returns the same client.

    Accepts an ``OpenAI``/``AsyncOpenAI`` client, a completions resource (anything with
    ``.create``), or a LangChain wrapper holding ``.client``/``.async_client``. Idempotent.
    """
    patched = False
    completions = getattr(getattr(client, "chat", None), "completions", None)
    if completions is not None:
        patched = _patch_create(completions, provider)
    elif getattr(client, "chat", None) is None and hasattr(client, "create"):
        patched = _patch_create(client, provider)
    else:
        for attr in ("client", "async_client"):
            inner = getattr(client, attr, None)
            if inner is not None:
                patched = bool(trace_client(inner, provider)) or patched
    if not patched:
        import warnings

        warnings.warn(
            f"trace_client: {type(client).__name__} has no chat.completions.create, .create, "
            ".client or .async_client; nothing traced",
            stacklevel=2,
        )
    return client


def observe_llm(
    fn: Optional[Callable[..., Any]] = None,
    *,
    provider: str = "openai",
    request_model_arg: str = "model",
    messages_arg: str = "messages",
    prompt_arg: str = "prompt",
    result_mapper: Optional[Callable[[Any], Any]] = None,
    handler: Any = None,
) -> Any:
    """Decorate a function called with ``model=`` and ``messages=`` keyword arguments."""
    del prompt_arg, handler  # accepted for signature compatibility

    def decorate(func: Callable[..., Any]) -> Any:
        return _wrap_llm_callable(func, provider, request_model_arg, messages_arg, result_mapper)

    return decorate(fn) if fn is not None else decorate


# --------------------------------------------------------------------------- tool spans


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

        def bound_args(args: tuple, kwargs: dict) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- worker entry


@contextlib.contextmanager
def entry_span(input_data: Any, headers: Optional[dict[str, str]] = None) -> Iterator[Any]:
    """The ``invoke_agentic_rl`` span a worker opens around every ``process`` call.

    The caller's W3C ``traceparent`` joins the span to the trainer's trace; the request ids
    go into baggage so that every span the user code opens carries them.
    """
    from opentelemetry.propagate import extract

    headers = {k.lower(): v for k, v in (headers or {}).items()}
    parent = extract(headers) if "traceparent" in headers else None
    meta = getattr(input_data, "request_metadata", None)
    ids = {k: getattr(meta, k, None) for k in BAGGAGE_KEYS} if meta is not None else {}
    token = context.attach(parent) if parent is not None else None
    started = time.perf_counter()
    try:
        with rollout_context(**ids):
            span = _tracer().start_span("invoke_agentic_rl", kind=SpanKind.INTERNAL)
            span.set_attribute("gen_ai.span.kind", "CHAIN")
            span.set_attribute("operation.name", "invoke_agentic_rl")
            span.set_attribute("gen_ai.user.query_root_flag", 1)
            span.set_attribute("agentic_rl.trace.linked", 1 if parent is not None else 0)
            if headers.get("x-request-id"):
                span.set_attribute("agentic_rl.upstream.trace_id", headers["x-request-id"])
            for key, attr in BAGGAGE_KEYS.items():
                if ids.get(key):
                    span.set_attribute(attr, ids[key])
            if ids.get("rollout_id"):
                span.set_attribute("request_id", ids["rollout_id"])
            with trace.use_span(
                span, end_on_exit=True, record_exception=True, set_status_on_exception=True
            ):
                try:
                    yield span
                finally:
                    span.set_attribute("agentic_rl.latency_s", time.perf_counter() - started)
    finally:
        if token is not None:
            context.detach(token)


__all__ = [
    "entry_span",
    "observe_llm",
    "observe_processor",
    "observe_tool",
    "preview",
    "rollout_context",
    "trace_client",
    "trace_tool",
]
