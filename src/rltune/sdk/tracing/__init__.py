"""OpenTelemetry instrumentation for user functions (the cloud SDK's observability names).

One module per concern: ``core`` (tracer, baggage ids, previews), ``processors``
(``observe_processor``, the worker's ``entry_span``), ``llm`` (``trace_client``,
``observe_llm``) and ``tools`` (``trace_tool``, ``observe_tool``).

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

from rltune.sdk.tracing.core import (
    BAGGAGE_KEYS,
    MAX_PREVIEW_BYTES,
    TRACER_NAME,
    preview,
    rollout_context,
)
from rltune.sdk.tracing.llm import observe_llm, trace_client
from rltune.sdk.tracing.processors import entry_span, observe_processor
from rltune.sdk.tracing.tools import observe_tool, trace_tool

__all__ = [
    "BAGGAGE_KEYS",
    "MAX_PREVIEW_BYTES",
    "TRACER_NAME",
    "entry_span",
    "observe_llm",
    "observe_processor",
    "observe_tool",
    "preview",
    "rollout_context",
    "trace_client",
    "trace_tool",
]
