"""The spans rltune itself opens: a step, each rollout attempt, each reward call (trainer) and
each generation (gateway), and the W3C headers that carry them to other processes.

One trace per step: the step span is the root, each rollout attempt its child; the rollout's
``traceparent`` goes to the function worker in ``RolloutInput.traceparent`` and the HTTP
headers, the worker's ``invoke_agentic_rl`` span joins it (``sdk.tracing.entry_span``), the
agent's LLM calls traced with ``trace_client`` send it on to the gateway, whose ``generate``
span joins under them. A call without the header still joins: the gateway falls back to the
rollout span registered with the rollout's key. Reward calls are children of their rollout.

With no tracer provider (``ENABLE_TRAJECTORY=false``) every span here is a no-op and no
header is sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from opentelemetry import baggage, context, propagate, trace
from opentelemetry.trace import SpanKind

from rltune.sdk.tracing import BAGGAGE_KEYS

_TRACER = "rltune.trainer"


def _tracer() -> trace.Tracer:
    return trace.get_tracer(_TRACER)


def trace_headers() -> dict[str, str]:
    """``traceparent`` (and baggage) of the current span; empty when it is not recorded."""
    if not trace.get_current_span().is_recording():
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def current_traceparent() -> Optional[str]:
    return trace_headers().get("traceparent")


def _ids(rollout_id: Optional[str], sample_id: Optional[str],
         attempt_id: Optional[str]) -> dict[str, str]:
    values = {"rollout_id": rollout_id, "sample_id": sample_id, "attempt_id": attempt_id}
    return {BAGGAGE_KEYS[k]: v for k, v in values.items() if v is not None}


@contextlib.contextmanager
def step_span(step: int, job_id: str) -> Iterator[None]:
    """The root span of a training step."""
    with _tracer().start_as_current_span(
        f"step {step}", attributes={"rltune.step": step, "rltune.job_id": job_id,
                                    "gen_ai.span.kind": "CHAIN"}):
        yield


@contextlib.contextmanager
def rollout_span(rollout_id: str, sample_id: str, attempt: int) -> Iterator[Optional[str]]:
    """One rollout attempt; yields its ``traceparent`` (None when not recorded)."""
    ctx = context.get_current()
    for key, value in (("rollout_id", rollout_id), ("sample_id", sample_id),
                       ("attempt_id", str(attempt))):
        ctx = baggage.set_baggage(key, value, context=ctx)
    token = context.attach(ctx)
    try:
        with _tracer().start_as_current_span(
            "rollout", kind=SpanKind.CLIENT,
            attributes={**_ids(rollout_id, sample_id, str(attempt)),
                        "gen_ai.span.kind": "AGENT"}):
            yield current_traceparent()
    finally:
        context.detach(token)


@contextlib.contextmanager
def reward_span(name: str, rollout_id: Optional[str], parent: Optional[str],
                *, group: bool = False) -> Iterator[dict[str, str]]:
    """A reward call, child of its rollout (``parent`` traceparent) or of the current span;
    yields the headers to send with the call."""
    ctx = propagate.extract({"traceparent": parent}) if parent else context.get_current()
    if rollout_id:
        ctx = baggage.set_baggage("rollout_id", rollout_id, context=ctx)
    with _tracer().start_as_current_span(
        f"{'group_reward' if group else 'reward'} {name}", context=ctx, kind=SpanKind.CLIENT,
        attributes={**_ids(rollout_id, None, None), "gen_ai.span.kind": "REWARD",
                    "rltune.reward.function": name}):
        yield trace_headers()


@contextlib.contextmanager
def generate_span(headers: Mapping[str, str], rollout_id: Optional[str],
                  fallback: Optional[str]) -> Iterator[Any]:
    """The gateway's span for one chat completion, joined to the caller's ``traceparent``
    (or to ``fallback``, the rollout span its key was registered with)."""
    carrier = {k.lower(): v for k, v in headers.items() if k.lower() in ("traceparent",
                                                                          "tracestate",
                                                                          "baggage")}
    if "traceparent" not in carrier and fallback:
        carrier["traceparent"] = fallback
    ctx = propagate.extract(carrier) if carrier else None
    if ctx is None and fallback is None:
        ctx = context.Context()  # a root, never the serving loop's ambient context
    attrs: dict[str, Any] = {"gen_ai.span.kind": "LLM", "gen_ai.operation.name": "generate"}
    attrs.update(_ids(rollout_id, None, None))
    with _tracer().start_as_current_span("generate", context=ctx, kind=SpanKind.SERVER,
                                         attributes=attrs) as span:
        yield span


def record_reward(output: Any) -> None:
    """Status and score of a reward call, on the current (reward) span."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    status = getattr(output, "status", None)
    span.set_attribute("agentic_rl.result.status", str(getattr(status, "value", status)))
    score = getattr(getattr(output, "reward", None), "reward_score", None)
    if isinstance(score, (int, float)):
        span.set_attribute("rltune.reward.score", float(score))
    if getattr(output, "error", None):
        span.set_attribute("rltune.reward.error", str(output.error)[:2000])
