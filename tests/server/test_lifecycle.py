"""Jobs on the tiny model under a real server: cancel, restart + resume, two jobs queued."""

from __future__ import annotations

import os
import signal
import time

import pytest
import yaml

from rltune.client import AgenticRL

from .conftest import make_workspace, start_server


def _submit(srv, ws) -> str:
    import asyncio

    client = AgenticRL(api_key=srv.key, base_url=srv.url).init(ws / "job.yaml")
    asyncio.run(client.register_functions())
    asyncio.run(client.upload_datasets())
    return client.submit_job().output.job_id


def _wait(c, job_id, cond, timeout=240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.get(f"/v1/jobs/{job_id}").json()
        if cond(job):
            return job
        time.sleep(0.3)
    raise AssertionError(f"timeout; last: {job}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_cancel_stops_the_process_group_and_keeps_checkpoints(server, tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=50)
    job_id = _submit(server, ws)
    with server.client() as c:
        _wait(c, job_id, lambda j: c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"])
        pid = _child_pid(server.home / "server" / "jobs" / job_id)
        t0 = time.monotonic()
        job = c.post(f"/v1/jobs/{job_id}/cancel").json()
        assert job["status"] == "CANCELED"
        while _alive(pid) and time.monotonic() - t0 < 5:
            time.sleep(0.1)
        assert not _alive(pid), "job process still alive 5 s after cancel"
        assert c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"]
        time.sleep(1.0)
        assert c.get(f"/v1/jobs/{job_id}").json()["status"] == "CANCELED"  # not overwritten
        r = c.post(f"/v1/jobs/{job_id}/cancel")
        assert r.status_code == 409 and "CANCELED" in r.json()["error"]["message"]


def _child_pid(job_dir) -> int:
    """The job process's pid (its process group leader) from the job's own log."""
    for line in (job_dir / "train.log").read_text().splitlines():
        if "job process " in line:
            return int(line.split("job process ")[1].split()[0])
    raise AssertionError("no pid in train.log")


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_server_restart_marks_job_failed_and_resume_finishes(server_home, tmp_path,
                                                             tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=3)
    srv = start_server(server_home)
    job_id = _submit(srv, ws)
    jobs_dir = server_home / "server" / "jobs" / job_id
    with srv.client() as c:
        _wait(c, job_id, lambda j: c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"])
    pid = _child_pid(jobs_dir)
    srv.kill(signal.SIGKILL)  # a crash: no shutdown code runs
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the job process outlived its server"
    srv = start_server(server_home)
    try:
        with srv.client() as c:
            job = c.get(f"/v1/jobs/{job_id}").json()
            assert job["status"] == "FAILED" and "resume" in job["error"], job
            saved = c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"][-1]
            job = c.post(f"/v1/jobs/{job_id}/resume").json()
            assert job["status"] == "PENDING" and job["resume_from"] == saved["path"]
            job = _wait(c, job_id, lambda j: j["status"] in ("SUCCEEDED", "FAILED"))
            assert job["status"] == "SUCCEEDED", job
            log = "\n".join(c.get(f"/v1/jobs/{job_id}/logs", params={"lines": 10**5})
                            .json()["logs"])
            assert f"resumed from {saved['path']} at step {saved['step']}" in log
            total = 8 // 2 * 3  # rows / batch_size * n_epochs
            steps = [s for s, _ in c.get(f"/v1/jobs/{job_id}/metrics", params={
                "names": "critic/rewards/mean"}).json()["series"]["critic/rewards/mean"]]
            assert steps == list(range(1, total + 1))
    finally:
        srv.kill(signal.SIGTERM)


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_second_job_waits_pending_then_runs(server, tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["training"]["hyper_parameters"].update(save_strategy="no", max_steps=2)  # queueing only
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    first, second = _submit(server, ws), _submit(server, ws)
    with server.client() as c:
        _wait(c, first, lambda j: j["status"] == "RUNNING")
        assert c.get(f"/v1/jobs/{second}").json()["status"] == "PENDING"
        listed = c.get("/v1/jobs", params={"status": "PENDING"}).json()
        assert [j["job_id"] for j in listed["items"]] == [second]
        a = _wait(c, first, lambda j: j["status"] in ("SUCCEEDED", "FAILED"))
        b = _wait(c, second, lambda j: j["status"] in ("SUCCEEDED", "FAILED"))
        assert a["status"] == b["status"] == "SUCCEEDED", (a, b)
        assert b["started_at"] >= a["finished_at"]
