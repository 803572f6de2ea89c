"""An MLflow tracking server that does not answer fails the run's start in seconds, naming
the uri, instead of after minutes of MLflow's retries (issue 30, item 12)."""

from __future__ import annotations

import socket
import time

import pytest

from rltune.config.observability import TrackerConfig
from rltune.sdk.errors import ConfigError

pytest.importorskip("mlflow")


def test_an_unreachable_tracking_server_fails_at_start(tmp_path):
    from rltune.observability.trackers.mlflow import MlflowTracker

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once the socket is closed
    tracker = MlflowTracker(TrackerConfig(type="mlflow", uri=f"http://127.0.0.1:{port}"),
                            job_dir=tmp_path, job_name="j")
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        tracker.start(run_name="r", params={}, resume_id=None)
    assert time.monotonic() - t0 < 10
    assert f"127.0.0.1:{port}" in err.value.message and "not reachable" in err.value.message
