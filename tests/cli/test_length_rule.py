"""One length rule for ``rltune train``, ``rltune plan``, ``rltune run`` and the job server:
a job that leaves its lengths unset runs on a model whose context is shorter than the defaults
(the tiny model's is 1,024 tokens), and one whose ``max_length`` cannot fit gets the same refusal
from all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import yaml
from rltune_test_server_fixtures import make_workspace
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.trainer.sink import read_metrics

runner = CliRunner()
NOTE = "lengths fitted to the model: max_length 1024 (unset: 2048 is beyond the model's context"
REFUSED = "max_length 4096 is beyond the model's context of 1024 tokens"


def job_with(ws, **hp) -> None:
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for key in ("max_length", "max_prompt_length"):
        job["training"]["hyper_parameters"].pop(key, None)
    job["training"]["hyper_parameters"].update(hp)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))


def rl(ws, *args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rltune.cli.main", *args], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=300)


def test_train_plan_and_run_apply_one_length_rule(server, tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, max_steps=1, save_strategy="no")
    job_with(ws)
    out = tmp_path / "out"
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(out)])
    assert res.exit_code == 0, res.output
    log = (out / "train.log").read_text()
    assert NOTE in log and "max_prompt_length 512 (unset)" in log, log
    step = next(r["metrics"] for r in read_metrics(out) if r["step"] == 1)
    assert step["trace/success_rate/agent"] == 1.0, log  # no rollout refused for its length

    res = runner.invoke(app, ["plan", "-c", str(ws / "job.yaml"), "--steps", "1", "--json"])
    assert res.exit_code in (0, 1), res.output  # 1: a warning about the small validation set
    report = json.loads(res.output)
    assert any(NOTE in n for n in report["notes"]), report

    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url}
    env.pop("RLTUNE_API_KEY", None)
    r = rl(ws, "run", "-c", "job.yaml", "--no-follow", "-o", "json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    job_id = json.loads(r.stdout)["job_id"]
    deadline = time.monotonic() + 240
    with server.client() as c:
        while time.monotonic() < deadline:
            job = c.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("SUCCEEDED", "FAILED", "CANCELED"):
                break
            time.sleep(0.5)
        logs = c.get(f"/v1/jobs/{job_id}/logs", params={"lines": 5000}).text
    assert job["status"] == "SUCCEEDED", logs
    assert NOTE in logs

    # a max_length that cannot fit: one refusal, before anything runs, from all three
    job_with(ws, max_length=4096, max_prompt_length=200)
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(tmp_path / "x")])
    assert res.exit_code == 2 and REFUSED in res.output, res.output
    assert not (tmp_path / "x").exists()
    res = runner.invoke(app, ["plan", "-c", str(ws / "job.yaml"), "--steps", "1"])
    assert res.exit_code == 2 and REFUSED in res.output, res.output
    r = rl(ws, "run", "-c", "job.yaml", "--no-follow", "-o", "json", env=env)
    assert r.returncode != 0 and REFUSED in r.stdout + r.stderr, r.stdout + r.stderr
