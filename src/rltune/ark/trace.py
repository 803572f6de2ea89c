"""Ark's tracing helpers (``ark_sdk.core.plugin.rollout.trace``) on OpenTelemetry.

Ark reports to CozeLoop; rltune records the same things as OpenTelemetry spans (no-ops until a
tracer provider is configured, see :mod:`rltune.sdk.tracing`):

* ``@coze_monitor`` on a rollout: one ``invoke_rollout <name>`` span with the sample as input
  and the proxy's trajectory as output, tagged with the job id (Ark's CozeLoop ``user_id``);
* ``wrap_inplace_trace(client)`` / ``wrap_async_client_inplace_trace(client)``: an LLM span
  per chat call (:func:`rltune.sdk.tracing.trace_client`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from opentelemetry import trace

from rltune.sdk.tracing import TRACER_NAME, preview, trace_client


def _span(func: Callable[..., Any], context: Any, sample: Any) -> Any:
    span = trace.get_tracer(TRACER_NAME).start_span(f"invoke_rollout {func.__name__}")
    span.set_attribute("gen_ai.span.kind", "ROLLOUT")
    job = (context or {}).get("modle_customization_job_id") if hasattr(context, "get") else None
    span.set_attribute("user.id", str(job or "test_service"))
    span.set_attribute("input.value", preview(sample))
    return span


def _finish(span: Any, proxy: Any, result: Any) -> None:
    messages = getattr(proxy, "message_dicts", None)
    span.set_attribute("output.value", preview(messages() if messages else result))


def coze_monitor(func: Callable[..., Any]) -> Callable[..., Any]:
    """Trace a rollout plugin ``(context, proxy, sample)``; keeps it sync or async."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def traced_async(context: Any, proxy: Any, sample: Any) -> Any:
            span = _span(func, context, sample)
            with trace.use_span(span, end_on_exit=True, record_exception=True):
                result = await func(context, proxy, sample)
                _finish(span, proxy, result)
                return result

        return traced_async

    @functools.wraps(func)
    def traced(context: Any, proxy: Any, sample: Any) -> Any:
        span = _span(func, context, sample)
        with trace.use_span(span, end_on_exit=True, record_exception=True):
            result = func(context, proxy, sample)
            _finish(span, proxy, result)
            return result

    return traced


def wrap_inplace_trace(client: Any) -> Any:
    """Record an LLM span for every chat call of a sync client; returns it."""
    return trace_client(client)


def wrap_async_client_inplace_trace(client: Any) -> Any:
    """Record an LLM span for every chat call of an async client; returns it."""
    return trace_client(client)


__all__ = ["coze_monitor", "wrap_async_client_inplace_trace", "wrap_inplace_trace"]
