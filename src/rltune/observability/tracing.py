"""Where a job's spans go: an OTLP exporter from the standard ``OTEL_*`` variables, or the
job directory (``spanstore.py``) when none is set; nowhere with ``ENABLE_TRAJECTORY=false``.

Each process of a job installs one tracer provider: the trainer (its step, rollout, reward and
gateway spans) in :func:`start_job_tracing`, each function worker in
:func:`start_worker_tracing`. Workers find the job's span folder in ``RLTUNE_TRACE_DIR``, which
the trainer sets for the processes it starts, and inherit the ``OTEL_*`` variables.

OTLP: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` turns it on;
``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`` is ``http/protobuf`` (default) or ``grpc``; headers,
timeouts and ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` are read by OpenTelemetry itself.
The exporters are the ``otlp`` extra.

The provider is installed once per process; a job attaches its span processor while it runs
and detaches it at the end, and spans started while no job is attached are not recorded (so a
serving gateway or a second job in the same process records nothing it should not).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from opentelemetry import baggage, trace

from rltune.config.switches import trajectories_enabled
from rltune.jobdir import JobDir
from rltune.observability.spanstore import ROLLOUT_ATTR, SpanStore
from rltune.sdk.errors import ConfigError
from rltune.sdk.tracing import BAGGAGE_KEYS

TRACE_DIR_ENV = "RLTUNE_TRACE_DIR"
_MAX_ATTR_CHARS = 4000
log = logging.getLogger("rltune.observability")


def otlp_exporter() -> Any:
    """The OTLP span exporter the ``OTEL_*`` variables ask for, or None when none is set."""
    env = os.environ
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint:
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        elif protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        else:
            raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported",
                              where="OTEL_EXPORTER_OTLP_PROTOCOL",
                              hint="use http/protobuf or grpc")
    except ImportError as exc:
        raise ConfigError(f"{endpoint} is set as the OTLP endpoint but the OTLP exporter for "
                          f"{protocol} is not installed ({exc})", where="OTEL_EXPORTER_OTLP_*",
                          hint="pip install 'rltune[otlp]', or unset the OTLP endpoint to "
                               "keep traces in the job directory") from exc
    return OTLPSpanExporter()


def span_record(span: Any) -> dict[str, Any]:
    """A finished SDK span as the JSON the job directory and the console use."""
    ctx, parent = span.context, span.parent
    attrs = {}
    for key, value in (span.attributes or {}).items():
        if isinstance(value, str) and len(value) > _MAX_ATTR_CHARS:
            value = value[:_MAX_ATTR_CHARS] + "…"
        attrs[key] = value if isinstance(value, (str, int, float, bool)) else list(value)
    status = span.status
    return {
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "name": span.name,
        "kind": span.kind.name,
        "service": span.resource.attributes.get("service.name"),
        "start": span.start_time / 1e9,
        "end": (span.end_time or span.start_time) / 1e9,
        "status": status.status_code.name,
        "error": status.description,
        "rollout_id": attrs.get(ROLLOUT_ATTR),
        "attributes": attrs,
    }


def _sdk() -> Any:
    from opentelemetry.sdk import trace as sdk_trace
    from opentelemetry.sdk.trace import export, sampling

    return sdk_trace, export, sampling


class _Router:
    """The provider's one span processor: copies the rollout ids from baggage onto each span
    and forwards to the processors of the attached job."""

    def __init__(self) -> None:
        self.processors: list[Any] = []
        self.lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for key, attr in BAGGAGE_KEYS.items():
            value = baggage.get_baggage(key, parent_context)
            if value is not None and not (span.attributes or {}).get(attr):
                span.set_attribute(attr, str(value))
        for p in list(self.processors):
            p.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        for p in list(self.processors):
            p.on_end(span)

    def _on_ending(self, span: Any) -> None:
        for p in list(self.processors):
            getattr(p, "_on_ending", lambda s: None)(span)

    def shutdown(self) -> None:
        for p in list(self.processors):
            p.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(p.force_flush(timeout_millis) for p in list(self.processors))


_ROUTER = _Router()
_INSTALLED: dict[str, Any] = {}


def _install(service: str) -> None:
    """Install (once per process) a provider that records only while a job is attached."""
    if _INSTALLED:
        return
    sdk_trace, _, sampling = _sdk()
    from opentelemetry.sdk.resources import Resource

    class _WhileAttached(sampling.Sampler):
        inner = sampling.ParentBased(sampling.ALWAYS_ON)

        def should_sample(self, *args: Any, **kwargs: Any) -> Any:
            if not _ROUTER.processors:
                return sampling.SamplingResult(sampling.Decision.DROP)
            return self.inner.should_sample(*args, **kwargs)

        def get_description(self) -> str:
            return "rltune: record while a job is attached"

    current = trace.get_tracer_provider()
    if isinstance(current, sdk_trace.TracerProvider):
        current.add_span_processor(_ROUTER)  # the user's own provider: add ours to it
    else:
        resource = Resource.create({"service.name": service,
                                    "service.instance.id": f"{service}-{os.getpid()}"})
        provider = sdk_trace.TracerProvider(sampler=_WhileAttached(), resource=resource)
        provider.add_span_processor(_ROUTER)
        trace.set_tracer_provider(provider)
    _INSTALLED["provider"] = trace.get_tracer_provider()


class _StoreExporter:
    def __init__(self, store: SpanStore):
        self.store = store

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        for span in spans:
            self.store.append(span_record(span))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class TracingHandle:
    """A job's attachment to this process's provider; ``close`` flushes and detaches."""

    processor: Any
    store: Optional[SpanStore]
    exporter: str
    _env: dict[str, Optional[str]] = field(default_factory=dict)
    _closed: bool = False

    def close(self) -> None:
        """Flush and detach; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self.processor.force_flush(10_000)
        finally:
            with _ROUTER.lock:
                if self.processor in _ROUTER.processors:
                    _ROUTER.processors.remove(self.processor)
            self.processor.shutdown()
            for key, value in self._env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def start_tracing(service: str, store_dir: Optional[Path],
                  enabled: Optional[bool] = None) -> Optional[TracingHandle]:
    """Attach an exporter (OTLP, else a span store in ``store_dir``) to this process; None
    when tracing is off (``enabled``, else ``ENABLE_TRAJECTORY``), or when there is neither an
    OTLP endpoint nor a store."""
    if not (trajectories_enabled() if enabled is None else enabled):
        return None
    exporter = otlp_exporter()
    if exporter is None and store_dir is None:
        return None
    try:
        _, export, _ = _sdk()
    except ImportError:
        log.warning("opentelemetry-sdk is not installed: no traces (pip install 'rltune[serve]')")
        return None
    _install(service)
    if exporter is not None:
        handle = TracingHandle(export.BatchSpanProcessor(exporter), None, "otlp")
    else:
        store = SpanStore(store_dir)  # type: ignore[arg-type]
        handle = TracingHandle(export.SimpleSpanProcessor(_StoreExporter(store)), store, "store")
    with _ROUTER.lock:
        _ROUTER.processors.append(handle.processor)
    return handle


def start_job_tracing(job_dir: Path, config: Any = None) -> Optional[TracingHandle]:
    """The trainer's tracing; sets ``RLTUNE_TRACE_DIR`` for the workers it starts. Off when
    the job's ``config`` or the environment sets ``ENABLE_TRAJECTORY=false``."""
    handle = start_tracing("rltune-trainer", JobDir(job_dir).traces,
                           enabled=trajectories_enabled(config))
    if handle is not None and handle.store is not None:
        handle._env[TRACE_DIR_ENV] = os.environ.get(TRACE_DIR_ENV)
        os.environ[TRACE_DIR_ENV] = str(handle.store.root)
    return handle


def start_worker_tracing(name: str) -> Optional[TracingHandle]:
    """A function worker's tracing (at start-up). The worker closes it when its server shuts
    down (SIGTERM); ``atexit`` covers the other ways out."""
    where = os.environ.get(TRACE_DIR_ENV)
    handle = start_tracing(f"rltune-function-{name}", Path(where) if where else None)
    if handle is not None:
        import atexit

        atexit.register(handle.close)
    return handle
