import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rltune.observability import tracing

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="session")
def _provider():
    # OpenTelemetry allows one global provider per process: rltune's (installed once, here or by
    # an earlier job in this test process), which records only while an exporter is attached.
    tracing._install("rltune-tests")


@pytest.fixture
def spans(_provider):
    """Spans recorded during the test, attached the way a job attaches its exporter."""
    processor = SimpleSpanProcessor(_EXPORTER)
    _EXPORTER.clear()
    with tracing._ROUTER.lock:
        tracing._ROUTER.processors.append(processor)
    yield _EXPORTER
    with tracing._ROUTER.lock:
        tracing._ROUTER.processors.remove(processor)
    _EXPORTER.clear()
