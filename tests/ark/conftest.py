"""A real policy gateway over the nano demo model, served from a background thread so that
CLI commands run in subprocesses can reach it."""

from __future__ import annotations

import pytest

from gateway.threaded import threaded_gateway  # tests/gateway/threaded.py


@pytest.fixture(scope="session")
def nano_endpoint(nano_model_dir):
    pytest.importorskip("torch")

    with threaded_gateway(nano_model_dir, static_keys=("ark-key",)) as gw:
        yield {"base_url": gw.base_url, "api_key": "ark-key", "model": gw.model_name}
