"""``…reinforcement.component.observability``: OpenTelemetry spans for user functions."""

from rltune.sdk.tracing import (
    entry_span,
    observe_llm,
    observe_processor,
    observe_tool,
    rollout_context,
    trace_client,
    trace_tool,
)

__all__ = [
    "entry_span",
    "observe_llm",
    "observe_processor",
    "observe_tool",
    "rollout_context",
    "trace_client",
    "trace_tool",
]
