"""Caps on what one request or one tenant can take: the JSON body of a job (item 9) and the
number of live deployments (item 10)."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from rltune.server.settings import ServerSettings

from .conftest import start_server


def test_a_json_body_over_the_cap_is_413_at_once_and_health_stays_quick(server):
    """Item 9: more than 1 MiB of JSON is refused before it is parsed, and a flood of big
    bodies leaves /health answering within a second."""
    config = {"name": "x", "model": "nano", "notes": ["x" * 1000] * 1500}  # ~1.5 MB
    body = json.dumps({"config": config}).encode()
    with server.client() as c:
        t0 = time.monotonic()
        r = c.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 413, r.text[:300]
        assert time.monotonic() - t0 < 5
        err = r.json()["error"]
        assert err["where"] == "request body" and str(2**20) in err["message"]
        # chunked (no Content-Length): refused once the cap is passed
        r = c.post("/v1/jobs", content=iter([body[i:i + 65536]
                                             for i in range(0, len(body), 65536)]),
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 413, r.text[:300]

    big = json.dumps({"config": {"name": "x", "notes": ["y" * 1000] * 30_000}}).encode()
    stop = threading.Event()

    def flood():
        with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {server.key}",
                                               "Content-Type": "application/json"}) as c:
            while not stop.is_set():
                try:
                    c.post(server.url + "/v1/jobs", content=big)
                except httpx.HTTPError:
                    pass  # the server may close the connection before all 30 MB are sent

    threads = [threading.Thread(target=flood) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        waits = []
        for _ in range(10):
            t0 = time.monotonic()
            assert httpx.get(server.url + "/health", timeout=10).status_code == 200
            waits.append(time.monotonic() - t0)
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert max(waits) < 1.0, waits


def test_the_json_cap_leaves_uploads_alone_and_is_configurable(server_home):
    srv = start_server(server_home, "--max-json-bytes", "4096")
    try:
        with srv.client() as c:
            r = c.post("/v1/keys", json={"name": "k" * 5000})
            assert r.status_code == 413 and "4096" in r.json()["error"]["message"]
            rows = b'{"messages": [{"role": "user", "content": "hi"}]}\n' * 200  # ~10 KB
            r = c.post("/v1/files", params={"filename": "t.jsonl"}, content=rows)
            assert r.status_code == 201, r.text
    finally:
        srv.kill()


def test_deployments_are_capped_with_the_numbers_in_the_error(server_home):
    """Item 10 over HTTP: a cap of 0 refuses before any serving process starts, naming the
    numbers and the setting."""
    srv = start_server(server_home, "--max-deployments-per-workspace", "0")
    try:
        with srv.client() as c:
            r = c.post("/v1/deployments", json={"models": ["m"]})
            assert r.status_code == 429, r.text
            err = r.json()["error"]
            assert "0 live deployments; the limit is 0" in err["message"]
            assert "--max-deployments-per-workspace" in err["hint"]
    finally:
        srv.kill()


@pytest.mark.parametrize("per_ws, total, ws, refused_by", [
    (2, 8, "a", "--max-deployments-per-workspace"),  # a has 2 live ones
    (2, 3, "b", "--max-deployments"),  # b has 1, the server 3
    (2, 4, "b", None),
])
def test_deployment_caps_count_live_ones(tmp_path, per_ws, total, ws, refused_by):
    """Item 10: only STARTING and RUNNING deployments count, per workspace and in all."""
    from rltune.sdk.errors import RltuneError
    from rltune.server.routes.deployments import check_deployment_caps
    from rltune.server.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    for i, (owner, status) in enumerate([("a", "RUNNING"), ("a", "STARTING"), ("a", "STOPPED"),
                                         ("a", "FAILED"), ("b", "RUNNING")]):
        store.put("deployments", {"id": f"dep-{i}", "workspace": owner, "status": status,
                                  "created_at": time.time()})
    settings = ServerSettings(home=tmp_path, max_deployments_per_workspace=per_ws,
                              max_deployments=total)
    request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(
        ctx=SimpleNamespace(store=store, settings=settings))))
    if refused_by is None:
        check_deployment_caps(request, ws)
        return
    with pytest.raises(RltuneError) as err:
        check_deployment_caps(request, ws)
    assert err.value.http_status == 429 and refused_by in err.value.hint
    assert f"the limit is {per_ws if ws == 'a' else total}" in err.value.message


@pytest.mark.slow  # a job on the tiny model, up to its first steps
def test_a_memory_size_below_a_workers_baseline_fails_the_job_fast(server, tmp_path,
                                                                    tiny_model_dir):
    """Issue 37 item 8: a cloud sample's ``memory_size: 4`` kills every worker right after
    setup. The job ends FAILED within a bounded time, naming runtime.memory_size and the
    measured baseline, instead of replacing workers hundreds of times while RUNNING."""
    import asyncio

    import yaml

    from rltune.client import AgenticRL
    from server.conftest import make_workspace

    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="no")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:
        fn["runtime"]["memory_size"] = 4
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    client = AgenticRL(api_key=server.key, base_url=server.url).init(ws / "job.yaml")
    asyncio.run(client.register_functions())
    asyncio.run(client.upload_datasets())
    job_id = client.submit_job().output.job_id
    with server.client() as c:
        deadline = time.monotonic() + 180
        try:
            while (got := c.get(f"/v1/jobs/{job_id}").json())["status"] in ("PENDING",
                                                                            "RUNNING"):
                assert time.monotonic() < deadline, got
                time.sleep(0.5)
        finally:
            c.post(f"/v1/jobs/{job_id}/cancel")
    assert got["status"] == "FAILED", got
    assert "runtime.memory_size 4 MB" in got["error"] and "baseline" in got["error"], got
    assert "killed for memory" in got["error"]
