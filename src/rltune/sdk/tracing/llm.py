"""LLM call spans: ``trace_client`` patches an OpenAI-style client, ``observe_llm`` decorates
a call; both pass the trace on to the model server (``traceparent`` headers)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Optional

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from rltune.sdk.tracing.core import (
    _PATCHED,
    _set_ids_from_baggage,
    _tracer,
    preview,
)


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
            out.append(msg.model_dump() if msg is not None and hasattr(msg, "model_dump")
                       else str(msg))
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
