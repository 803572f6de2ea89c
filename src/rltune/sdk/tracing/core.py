"""What every span of the SDK shares: the tracer, the rollout ids in baggage, previews.

Example:
    >>> preview({"a": 1})
    '{"a": 1}'
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Optional

from opentelemetry import baggage, context, trace

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
