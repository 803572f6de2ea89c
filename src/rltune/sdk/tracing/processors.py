"""Spans of a processor call: ``observe_processor`` on ``process`` and the worker's
``invoke_agentic_rl`` entry span (joined to the trainer's trace by ``traceparent``)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any, Optional

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind

from rltune.sdk.tracing.core import (
    BAGGAGE_KEYS,
    _set_ids_from_baggage,
    _tracer,
    preview,
    rollout_context,
)


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
