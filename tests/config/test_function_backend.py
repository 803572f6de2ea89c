"""``function_backend``: where a job's function instances run (local processes or Ray actors)."""

from __future__ import annotations

import pytest

from rltune.config import load_job_config_text
from rltune.functions.backends import LocalProcessBackend, backend_for
from rltune.sdk.errors import ConfigError

JOB = "model: m\n"


def test_unset_and_local_mean_local_processes():
    assert load_job_config_text(JOB).function_backend is None
    assert isinstance(backend_for(None), LocalProcessBackend)
    job = load_job_config_text(JOB + "function_backend: local\n")
    assert isinstance(backend_for(job.function_backend), LocalProcessBackend)


def test_ray_shorthand_and_address_round_trip():
    job = load_job_config_text(JOB + "function_backend: ray\n")
    assert (job.function_backend.type, job.function_backend.address) == ("ray", None)
    job = load_job_config_text(JOB + "function_backend: {type: ray, address: 10.0.0.5:6379}\n")
    assert load_job_config_text(job.to_yaml_text()) == job
    pytest.importorskip("ray")
    backend = backend_for(job.function_backend)
    assert type(backend).__name__ == "RayBackend" and backend.address == "10.0.0.5:6379"


@pytest.mark.parametrize("text, words", [
    ("function_backend: {type: local, address: h:1}\n", "only applies to type ray"),
    ("function_backend: {gateway_host: 10.0.0.2}\n", "gateway_host (10.0.0.2) only applies"),
    ("function_backend: kubernetes\n", "function_backend"),
    ("function_backend: {type: ray, adress: h:1}\n", "address"),
])
def test_bad_backend_is_refused_by_name(text, words):
    with pytest.raises(ConfigError) as info:
        load_job_config_text(JOB + text)
    assert words in str(info.value)


def test_an_explicit_gateway_host_is_used_as_given():
    pytest.importorskip("ray")
    from rltune.functions.backends.ray_backend import gateway_host

    job = load_job_config_text(JOB + "function_backend: {type: ray, gateway_host: 10.0.0.2}\n")
    assert gateway_host(job.function_backend) == "10.0.0.2"  # no cluster needed
