"""Where a server's jobs run their functions (``--ray-address``): the placement rule, and the
refusals at submit and for a second workspace, through a real server (no cluster needed: the
server's setting is checked before a job exists). Jobs on a real cluster: test_ray_jobs.py."""

from __future__ import annotations

import pytest

from ray_cluster import free_port
from rltune.config import FunctionBackend
from rltune.sdk.errors import ConfigError
from rltune.server.cluster import place_functions

from .conftest import start_server

ADDR = "10.0.0.5:6379"


def test_placement_rule():
    assert place_functions(None, None) is None
    local = FunctionBackend(type="local")
    assert place_functions(local, None) is local
    assert place_functions(local, ADDR) is local  # the job's choice stays
    placed = place_functions(None, ADDR)
    assert (placed.type, placed.address) == ("ray", ADDR)
    own = place_functions(FunctionBackend(type="ray", gateway_host="10.0.0.9"), ADDR)
    assert (own.address, own.gateway_host) == (ADDR, "10.0.0.9")
    same = FunctionBackend(type="ray", address=ADDR)
    assert place_functions(same, ADDR) is same
    with pytest.raises(ConfigError) as err:
        place_functions(FunctionBackend(type="ray"), None)
    assert err.value.where == "function_backend" and "--ray-address" in err.value.hint
    with pytest.raises(ConfigError) as err:
        place_functions(FunctionBackend(type="ray", address="10.0.0.6:6379"), ADDR)
    assert err.value.where == "function_backend.address" and ADDR in err.value.message


def test_server_without_cluster_refuses_a_ray_job_at_submit(server):
    with server.client() as c:
        assert c.get("/health").json()["function_backend"] == "local"
        r = c.post("/v1/jobs", json={"config": {"model": "tiny", "function_backend": "ray"}})
        body = r.json()["error"]
        assert r.status_code == 422 and body["where"] == "function_backend", body
        assert "no Ray cluster" in body["message"] and "--ray-address" in body["hint"]
        assert c.get("/v1/jobs").json()["total"] == 0


def test_server_without_cluster_refuses_nnodes_training_at_submit(server):
    with server.client() as c:
        r = c.post("/v1/jobs", json={"config": {"model": "tiny", "training": {
            "hyper_parameters": {"nnodes_training": 2, "kl_loss_coef": 0}}}})
        body = r.json()["error"]
        assert r.status_code == 422, body
        assert body["where"] == "training.hyper_parameters.nnodes_training", body
        assert "needs a Ray cluster" in body["message"] and "--ray-address" in body["hint"]
        assert c.get("/v1/jobs").json()["total"] == 0


def test_server_with_cluster_refuses_another_cluster_and_a_second_workspace(server_home):
    addr = f"127.0.0.1:{free_port()}"  # nothing listens: the server warns and serves
    srv = start_server(server_home, "--ray-address", addr)
    try:
        with srv.client() as c:
            assert c.get("/health").json()["function_backend"] == "ray"
            r = c.post("/v1/jobs", json={"config": {"model": "tiny", "function_backend": {
                "type": "ray", "address": "10.0.0.6:6379"}}})
            body = r.json()["error"]
            assert r.status_code == 422 and body["where"] == "function_backend.address", body
            assert addr in body["message"]
            r = c.post("/v1/keys", json={"workspace": "team-b"})
            assert r.status_code == 409 and "Ray cluster" in r.json()["error"]["message"]
        assert "does not answer" in (server_home / "server.log").read_text()
    finally:
        srv.kill()


def test_settings_take_the_address_from_the_flag_or_env(monkeypatch, tmp_path):
    from rltune.server.settings import ServerSettings

    monkeypatch.setenv("RLTUNE_RAY_ADDRESS", ADDR)
    monkeypatch.setenv("RAY_ADDRESS", "10.9.9.9:6379")  # Ray's own variable does not move jobs
    assert ServerSettings.from_env(home=tmp_path).ray_address == ADDR
    assert ServerSettings.from_env(home=tmp_path, ray_address="h:1").ray_address == "h:1"
    monkeypatch.delenv("RLTUNE_RAY_ADDRESS")
    assert ServerSettings.from_env(home=tmp_path).ray_address is None
