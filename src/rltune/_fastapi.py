"""FastAPI apps on the rollout path, without FastAPI's own per-request telemetry.

FastAPI 0.165 opens OpenTelemetry spans of its own for every request (a server span, plus
spans for dependency resolution, the endpoint and serialisation) whenever a tracer provider
is installed, which every job process does. rltune already records the span that matters for
each call (the gateway's ``generate``, the worker's ``invoke_agentic_rl``), and on the policy
gateway FastAPI's spans took about a fifth of the event loop's time during a rollout
(benchmarks/RESULTS.md, 2026-12-03), so the apps built here switch them off. FastAPI versions
without native telemetry take no ``telemetry`` argument and get none.

Example:
    >>> app = fastapi_app(title="demo", docs_url=None, redoc_url=None)   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

#: FastAPI's native telemetry, all of it off (traces, metrics, logs, operation spans).
NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


@functools.cache
def _takes_telemetry() -> bool:
    from fastapi import FastAPI

    return "telemetry" in inspect.signature(FastAPI.__init__).parameters


def fastapi_app(**kwargs: Any) -> Any:
    """``FastAPI(**kwargs)`` with FastAPI's native telemetry off (where it has any)."""
    from fastapi import FastAPI

    if _takes_telemetry():
        kwargs.setdefault("telemetry", dict(NO_TELEMETRY))
    return FastAPI(**kwargs)
