"""``ENABLE_TRAJECTORY=false``: no provider is attached, no span is recorded, no header sent."""

from __future__ import annotations

import os

import pytest

from rltune.config.switches import trajectories_enabled
from rltune.observability.spans import rollout_span, step_span, trace_headers
from rltune.observability.tracing import (
    TRACE_DIR_ENV,
    otlp_exporter,
    start_job_tracing,
    start_worker_tracing,
)
from rltune.sdk.errors import ConfigError

pytest.importorskip("opentelemetry.sdk")


@pytest.mark.parametrize(("value", "on"), [("false", False), ("0", False), ("No", False),
                                           ("off", False), ("true", True), ("", True)])
def test_the_switch_reads_enable_trajectory(value, on):
    assert trajectories_enabled(None, {"ENABLE_TRAJECTORY": value}) is on


def test_a_value_that_is_not_a_switch_is_refused():
    with pytest.raises(ConfigError, match="ENABLE_TRAJECTORY is 'maybe', not a boolean"):
        trajectories_enabled(None, {"ENABLE_TRAJECTORY": "maybe"})


def test_off_means_no_spans_no_headers_no_files(tmp_path, monkeypatch):
    monkeypatch.setenv("ENABLE_TRAJECTORY", "false")
    monkeypatch.delenv(TRACE_DIR_ENV, raising=False)
    assert start_job_tracing(tmp_path) is None
    assert start_worker_tracing("reward") is None
    with step_span(1, "ft-x"), rollout_span("r-1", "s-1", 0) as traceparent:
        assert traceparent is None and trace_headers() == {}
    assert not (tmp_path / "traces").exists() and TRACE_DIR_ENV not in os.environ


def test_on_keeps_spans_in_the_job_dir_and_tells_the_workers(tmp_path, monkeypatch):
    for var in ("ENABLE_TRAJECTORY", "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    handle = start_job_tracing(tmp_path)
    try:
        assert os.environ[TRACE_DIR_ENV] == str(tmp_path / "traces")
        with step_span(1, "ft-x"), rollout_span("r-1", "s-1", 0) as traceparent:
            assert traceparent and traceparent.startswith("00-")
            assert trace_headers()["traceparent"] == traceparent
    finally:
        handle.close()
    assert TRACE_DIR_ENV not in os.environ
    rollout = handle.store.take("r-1")
    assert [s["name"] for s in rollout] == ["rollout"]
    assert rollout[0]["attributes"]["bailian.agentic_rl.attempt_id"] == "0"
    with step_span(2, "ft-x"):  # detached: nothing more is recorded
        assert trace_headers() == {}


def test_an_unknown_otlp_protocol_is_refused(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ConfigError, match="use http/protobuf or grpc"):
        otlp_exporter()
