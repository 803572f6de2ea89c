"""One chat call records rltune's own ``generate`` span and nothing of FastAPI's.

FastAPI >= 0.165 opens a server span and operation spans per request whenever a tracer provider
is installed (every job process installs one); the gateway turns them off (``rltune._fastapi``)
because they cost the trainer's event loop about a fifth of its rollout time.
"""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("opentelemetry.sdk")


async def test_a_chat_call_records_only_the_generate_span(gateway):
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rltune.observability import tracing

    # Once per process, and the first name wins: the gateway lives in the trainer's process,
    # so install the trainer's (tests/observability checks that a job's spans carry it).
    tracing._install("rltune-trainer")
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    with tracing._ROUTER.lock:
        tracing._ROUTER.processors.append(processor)
    gateway.register("rk-1", "r-1")
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            resp = await http.post(gateway.base_url + "/chat/completions",
                                   headers={"Authorization": "Bearer rk-1"},
                                   json={"messages": [{"role": "user", "content": "hi"}],
                                         "max_tokens": 3})
        assert resp.status_code == 200, resp.text
    finally:
        with tracing._ROUTER.lock:
            tracing._ROUTER.processors.remove(processor)
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["generate"], names
