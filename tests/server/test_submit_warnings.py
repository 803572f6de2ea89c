"""The hyper-parameter anti-patterns at submit (issue 40 item 8): the job server's answer lists
them (``warnings``), the job's log starts with them, the clients print them, and the job runs
anyway; a clean job gets ``warnings: []``."""

from __future__ import annotations

import asyncio
import json
import logging

import yaml
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.client import AgenticRL

from .conftest import make_workspace
from .test_lifecycle import _wait

# the tiny model's own bound: the server resolved the model and counted its parameters
LR_HIGH = "learning_rate 0.001 is above 0.0005, where models of under 10M parameters"
ONE_ROLLOUT = "n_rollouts 1: no group to compare within"


def test_submit_answers_the_anti_patterns_and_the_job_still_runs(server, tmp_path,
                                                                  tiny_model_dir, caplog,
                                                                  monkeypatch):
    # on-policy distillation is the job where n_rollouts 1 is allowed (and still warned)
    ws = make_workspace(tmp_path, tiny_model_dir, learning_rate=1e-3, n_rollouts=1,
                        kl_loss_coef=0.001, max_steps=1, save_strategy="no")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["teacher_model"] = str(tiny_model_dir)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))

    # the CLI (through the SDK): the warnings logged (stderr) and in the JSON answer
    monkeypatch.setenv("RLTUNE_BASE_URL", server.url)
    monkeypatch.setenv("RLTUNE_API_KEY", server.key)
    monkeypatch.chdir(ws)
    with caplog.at_level(logging.WARNING, logger="rltune.client"):
        r = CliRunner().invoke(app, ["rl", "run", "-c", "job.yaml", "--no-follow", "-o",
                                     "json"])
    assert r.exit_code == 0, r.output
    answer = json.loads(r.stdout)
    job_id, warned = answer["job_id"], answer["warnings"]
    assert len(warned) == 2 and LR_HIGH in warned[0] and ONE_ROLLOUT in warned[1], answer
    assert [rec.getMessage() for rec in caplog.records] == [f"{job_id}: {w}" for w in warned]

    with server.client() as c:
        # the job runs anyway (its process started), and its log starts with the warnings
        assert _wait(c, job_id, lambda j: j["status"] != "PENDING")["status"] in (
            "RUNNING", "SUCCEEDED")
        log = c.get(f"/v1/jobs/{job_id}/logs").json()["logs"]
        assert LR_HIGH in log[0] and "WARNING" in log[0] and ONE_ROLLOUT in log[1], log[:3]
        c.post(f"/v1/jobs/{job_id}/cancel")
        # the field is in the OpenAPI document, described
        spec = c.get("/openapi.json").json()
        field = spec["components"]["schemas"]["JobSubmitted"]["properties"]["warnings"]
        assert field["type"] == "array" and "anti-patterns" in field["description"]

    # the SDK, on a clean job: [] and nothing logged
    caplog.clear()
    clean = make_workspace(tmp_path / "clean", tiny_model_dir, learning_rate=1e-6,
                           kl_loss_coef=0.001)
    client = AgenticRL(api_key=server.key, base_url=server.url).init(clean / "job.yaml")
    asyncio.run(client.register_functions())
    asyncio.run(client.upload_datasets())
    with caplog.at_level(logging.WARNING, logger="rltune.client"):
        out = client.submit_job().output
    assert out.warnings == [] and not caplog.records
    client.cancel(out.job_id)
    # a copy of the warned job is a submit too: warned again, on the SDK's logger
    with caplog.at_level(logging.WARNING, logger="rltune.client"):
        copy = client.copy(job_id).output
    assert len(copy.warnings) == 2
    assert [rec.getMessage() for rec in caplog.records] == \
        [f"{copy.job_id}: {w}" for w in copy.warnings]
    client.cancel(copy.job_id)
