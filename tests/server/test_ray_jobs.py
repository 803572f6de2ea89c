"""Jobs of a server started with ``--ray-address`` on a local two-node Ray cluster (127.0.0.1,
one CPU per node), through the real REST API and client: a job succeeds with its functions as
Ray actors and its logs served; a cancelled job ends CANCELED; a job whose process is stopped
(SIGTERM), then killed (SIGKILL), ends FAILED each time and resumes to SUCCEEDED on the
cluster; after each, ``ray status`` shows every CPU free and no function worker is left.
Slow tier (cluster start + three short jobs, one resumed twice: ~6-8 min on 2 loaded cores)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from ray_cluster import LocalRayCluster
from rltune.client import AgenticRL

from .conftest import make_workspace, start_server

pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tmpdir_env():
    """A private TMPDIR for the cluster's nodes, the server and its jobs: what a job leaves in
    it (the driver's and the actors' scratch folders) is this module's alone."""
    path = Path(tempfile.mkdtemp(prefix="srt", dir="/tmp"))  # short: Ray's socket paths
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(path))
        yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmpdir_env):
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as c:
        yield c


def _scratch(tmpdir_env) -> set[str]:
    """The driver's (``rltune-ray-*``) and the actors' (``rltune-ray-worker-*``) folders."""
    return {p.name for p in tmpdir_env.glob("rltune-ray-*")}


@pytest.fixture(scope="module")
def ray_server(cluster, tmpdir_env, tmp_path_factory):
    home = tmp_path_factory.mktemp("rayhome")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLTUNE_HOME", str(home))
        for var in ("RLTUNE_API_KEY", "RLTUNE_BASE_URL", "RAY_ADDRESS"):
            mp.delenv(var, raising=False)
        srv = start_server(home, "--ray-address", cluster.address)
        try:
            yield srv
        finally:
            srv.kill(signal.SIGTERM)


def _workspace(root, model_dir, **hp):
    ws = make_workspace(root, model_dir, **hp)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:  # one 1-CPU actor each: the cluster's two CPUs
        fn["runtime"]["cpu"] = 1
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def _submit(srv, ws) -> str:
    client = AgenticRL(api_key=srv.key, base_url=srv.url).init(ws / "job.yaml")
    asyncio.run(client.register_functions())
    asyncio.run(client.upload_datasets())
    return client.submit_job().output.job_id


def _wait(c, job_id, cond, timeout=300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.get(f"/v1/jobs/{job_id}").json()
        if cond(job):
            return job
        time.sleep(0.3)
    raise AssertionError(f"timeout; last: {job}")


def _log(c, job_id) -> str:
    return "\n".join(c.get(f"/v1/jobs/{job_id}/logs", params={"lines": 10**5}).json()["logs"])


def _has_checkpoint(c, job_id) -> bool:
    return bool(c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"])


def _cpus_in_use(cluster) -> tuple[float, float]:
    """(used, total) CPUs from ``ray status``."""
    out = cluster.status()
    found = re.search(r"([\d.]+)/([\d.]+) CPU", out)
    assert found, out
    return float(found.group(1)), float(found.group(2))


def _assert_cluster_free(cluster, timeout=90.0) -> None:
    """``ray status`` shows every CPU free, and no function worker runs on the cluster."""
    deadline = time.monotonic() + timeout
    while True:
        used, total = _cpus_in_use(cluster)
        workers = [p.pid for p in cluster._ours()
                   if "rltune.functions.worker" in " ".join(p.cmdline())]
        if used == 0 and total == cluster.total_cpus() and not workers:
            return
        assert time.monotonic() < deadline, (cluster.status(), workers)
        time.sleep(1.0)


def _job_pid(c, job_id) -> int:
    found = re.search(r"job process (\d+) started", _log(c, job_id))
    assert found, _log(c, job_id)
    return int(found.group(1))


def test_job_runs_its_functions_on_the_cluster(ray_server, cluster, tmpdir_env, tmp_path,
                                               nano_model_dir):
    before = _scratch(tmpdir_env)
    ws = _workspace(tmp_path, nano_model_dir, max_steps=2, save_strategy="no")
    job_id = _submit(ray_server, ws)
    with ray_server.client() as c:
        job = _wait(c, job_id, lambda j: j["status"] in ("SUCCEEDED", "FAILED", "CANCELED"))
        log = _log(c, job_id)
        assert job["status"] == "SUCCEEDED", (job["error"], log[-3000:])
        assert f"functions run as Ray actors on the cluster at {cluster.address}" in log
        assert log.count("on RayBackend: 1 instance(s)") == 2, log[:3000]  # rollout + reward
        assert job["config"].get("function_backend") is None  # as submitted
    _assert_cluster_free(cluster)
    assert _scratch(tmpdir_env) == before  # the job removed its scratch folders


def test_cancel_frees_the_cluster(ray_server, cluster, tmp_path, nano_model_dir):
    ws = _workspace(tmp_path, nano_model_dir, n_epochs=50)
    job_id = _submit(ray_server, ws)
    with ray_server.client() as c:
        _wait(c, job_id, lambda j: j["status"] != "RUNNING" or _has_checkpoint(c, job_id))
        assert _log(c, job_id).count("on RayBackend") == 2
        assert _cpus_in_use(cluster)[0] == 2  # both actors hold their CPU
        job = c.post(f"/v1/jobs/{job_id}/cancel").json()
        assert job["status"] == "CANCELED", job
        _assert_cluster_free(cluster)
        assert c.get(f"/v1/jobs/{job_id}").json()["status"] == "CANCELED"


def _checkpoint_after(c, job_id, step) -> bool:
    saved = c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"]
    return any(ck["step"] > step for ck in saved)


def test_stopped_and_killed_jobs_free_the_cluster_and_resume_on_it(ray_server, cluster,
                                                                   tmpdir_env, tmp_path,
                                                                   nano_model_dir):
    before = _scratch(tmpdir_env)
    ws = _workspace(tmp_path, nano_model_dir, n_epochs=3)  # 12 steps
    job_id = _submit(ray_server, ws)
    with ray_server.client() as c:
        _wait(c, job_id, lambda j: j["status"] != "RUNNING" or _has_checkpoint(c, job_id))
        assert _cpus_in_use(cluster)[0] == 2
        # SIGTERM: the orderly stop (Ray's own SIGTERM handler in the driver does not cut it)
        os.kill(_job_pid(c, job_id), signal.SIGTERM)
        job = _wait(c, job_id, lambda j: j["status"] != "RUNNING")
        assert job["status"] == "FAILED" and "stopped by a signal" in job["error"], job
        _assert_cluster_free(cluster)
        assert _scratch(tmpdir_env) == before  # closed in order: actors stopped, folders gone
        saved = c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"][-1]
        assert c.post(f"/v1/jobs/{job_id}/resume").json()["status"] == "PENDING"
        _wait(c, job_id, lambda j: j["status"] != "PENDING" and (
            j["status"] != "RUNNING" or _checkpoint_after(c, job_id, saved["step"])))
        assert c.get(f"/v1/jobs/{job_id}").json()["status"] == "RUNNING"
        # SIGKILL: no shutdown code runs in the driver; Ray ends the actors it owned
        pids = re.findall(r"job process (\d+) started", _log(c, job_id))
        os.kill(int(pids[-1]), signal.SIGKILL)
        job = _wait(c, job_id, lambda j: j["status"] != "RUNNING")
        assert job["status"] == "FAILED", job
        _assert_cluster_free(cluster)
        assert c.post(f"/v1/jobs/{job_id}/resume").json()["status"] == "PENDING"
        job = _wait(c, job_id, lambda j: j["status"] not in ("PENDING", "RUNNING"))
        log = _log(c, job_id)
        assert job["status"] == "SUCCEEDED", (job["error"], log[-3000:])
        assert log.count("resumed from") == 2
        assert log.count("on RayBackend") == 6  # each of the three runs put both on Ray
        steps = [s for s, _ in c.get(f"/v1/jobs/{job_id}/metrics", params={
            "names": "critic/rewards/mean"}).json()["series"]["critic/rewards/mean"]]
        assert steps[-1] == 12
    _assert_cluster_free(cluster)
