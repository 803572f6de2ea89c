"""The cloud CLI flow end to end against a real local server, from a workspace directory:
register (--no-lazy-load) → test each instance → upload_data → run -c job.yaml -o json →
get → logs; then the job's metrics, trajectories and checkpoints over REST."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from rltune_test_server_fixtures import make_workspace


def rl(ws, *args, env):
    proc = subprocess.run([sys.executable, "-m", "rltune.cli.main", *args], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_cloud_flow_end_to_end(server, tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir)
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url}
    env.pop("RLTUNE_API_KEY", None)  # the local admin key is picked up
    r = rl(ws, "rl", "register_functions", "--rollout-classpaths",
           "functions/rollout.py:CalcRollout", "--reward-classpaths",
           "functions/reward.py:CalcReward", "--no-lazy-load", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)
    assert ids["rollout_entity_ids"][0].startswith("ro-")
    assert ids["reward_instance_ids"][0].startswith("rw-ins-")
    reward_in = {"func_type": "reward", "ground_truth": "4", "agent_output": {
        "messages": [{"role": "assistant", "content": "4"}]}}
    r = rl(ws, "rl", "test-functions", ids["reward_instance_ids"][0], "-t", "REWARD",
           "-i", json.dumps(reward_in), "-o", "json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["status"] == "success"
    r = rl(ws, "rl", "test_functions", ids["rollout_instance_ids"][0], "-t", "rollout",
           "-i", "{\"messages\": []}", "-o", "json", env=env)
    assert r.returncode == 1 and json.loads(r.stdout)["status"] == "failed"  # clear failure
    r = rl(ws, "upload-data", "--training-files", "data/train.jsonl", "--validation-files",
           "data/val.jsonl", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["uploaded_training_ids"][0].startswith("file-")
    r = rl(ws, "run", "-c", "job.yaml", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    job_id = json.loads(r.stdout)["job_id"]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        r = rl(ws, "get", job_id, "-o", "json", env=env)
        status = json.loads(r.stdout)["status"]
        if status in ("SUCCEEDED", "FAILED", "CANCELED"):
            break
        time.sleep(1)
    assert status == "SUCCEEDED", r.stdout
    r = rl(ws, "rl", "logs", job_id, "--lines", "5000", env=env)
    assert "finished:" in r.stdout
    with server.client() as c:
        series = c.get(f"/v1/jobs/{job_id}/metrics").json()["series"]
        assert len(series["critic/rewards/mean"]) == 4
        steps = c.get(f"/v1/jobs/{job_id}/trajectories/steps").json()["steps"]
        assert steps[0] == {"step": 1, "count": 4}
        page = c.get(f"/v1/jobs/{job_id}/trajectories",
                     params={"step": 1, "page_size": 3, "max_reward": 1.0}).json()
        assert page["total"] == 4 and len(page["items"]) == 3
        one = page["items"][0]
        got = c.get(f"/v1/jobs/{job_id}/trajectories/1/{one['rollout_id']}").json()
        assert got["messages"] == one["messages"]
        groups = c.get(f"/v1/jobs/{job_id}/trajectories/1/groups").json()["groups"]
        assert [len(g["trajectories"]) for g in groups] == [2, 2]
        ckpts = c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"]
        assert [k["name"] for k in ckpts] == ["checkpoint-3", "checkpoint-4"]
        assert ckpts[-1]["validation_reward"] is not None
        detail = c.get(f"/v1/jobs/{job_id}").json()
        assert "hyper_parameters" in detail["config_yaml"] and detail["latest_reward"] is not None
    # the table, piped at 80 columns: every job id in full, on one line (rltune list)
    r = rl(ws, "list", env={**env, "COLUMNS": "80"})
    assert r.returncode == 0 and any(job_id in line for line in r.stdout.splitlines()), r.stdout
    r = rl(ws, "list", "-o", "json", env=env)
    assert [j["job_id"] for j in json.loads(r.stdout)["items"]] == [job_id]


def test_run_verbose_prints_no_line_per_http_request(server, tmp_path, tiny_model_dir):
    """`rl run --verbose` says where the job went; httpx's INFO line per request (per poll
    when following) stays off unless LOG_LEVEL=debug."""
    ws = make_workspace(tmp_path, tiny_model_dir)
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url}
    for var in ("RLTUNE_API_KEY", "LOG_LEVEL", "RLTUNE_LOG_LEVEL"):
        env.pop(var, None)
    r = rl(ws, "rl", "run", "-c", "job.yaml", "--verbose", "--no-follow", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    job_id = json.loads(r.stdout)["job_id"]
    try:
        assert f"submitted {job_id} to {server.url}" in r.stderr
        assert "HTTP Request" not in r.stderr and "httpx" not in r.stderr, r.stderr
    finally:
        with server.client() as c:
            c.post(f"/v1/jobs/{job_id}/cancel")
