"""Volcano Ark's job operations on a real server with real jobs on the tiny model: copy (复制,
with overrides, as REST and as ``rltune copy --set``) and stop (停止: the job ends at a step
boundary with a checkpoint, STOPPED, and resumes)."""

from __future__ import annotations

import json
import time

from typer.testing import CliRunner

from rltune.cli.main import app

from .conftest import make_workspace
from .test_lifecycle import _submit, _wait


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_copy_a_job_with_one_override(server, tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="no")
    src = _submit(server, ws)
    with server.client() as c:
        c.post(f"/v1/jobs/{src}/cancel")  # copy works on a job in any state
        source = c.get(f"/v1/jobs/{src}").json()["config"]
        r = c.post(f"/v1/jobs/{src}/copy",
                   json={"overrides": {"training.hyper_parameters.learning_rate": 5e-4}})
        assert r.status_code == 201, r.text
        new = r.json()
        assert new["job_id"] != src and new["copied_from"] == src
        assert new["job_name"] == f"{source['name']}-copy"
        c.post(f"/v1/jobs/{new['job_id']}/cancel")
        copied = c.get(f"/v1/jobs/{new['job_id']}").json()["config"]
        assert copied["training"]["hyper_parameters"]["learning_rate"] == 5e-4
        # everything else is the source's: the same uploaded files and registered functions
        copied["training"]["hyper_parameters"]["learning_rate"] = \
            source["training"]["hyper_parameters"]["learning_rate"]
        assert {**copied, "name": source["name"]} == source

        # a nested object merges into the section (JSON merge-patch), keeping the rest
        r = c.post(f"/v1/jobs/{src}/copy",
                   json={"overrides": {"training": {"hyper_parameters": {"max_steps": 2}}}})
        assert r.status_code == 201, r.text
        c.post(f"/v1/jobs/{r.json()['job_id']}/cancel")
        merged = c.get(f"/v1/jobs/{r.json()['job_id']}").json()["config"]
        assert merged["training"]["hyper_parameters"] == {
            **source["training"]["hyper_parameters"], "max_steps": 2}

        # a bad value or an unknown key: 422 naming the field, and no job is made
        total = c.get("/v1/jobs").json()["total"]
        r = c.post(f"/v1/jobs/{src}/copy", json={"overrides": {"learning_rate": "fast"}})
        assert r.status_code == 422, r.text
        assert "training.hyper_parameters.learning_rate = 'fast'" in r.json()["error"]["message"]
        r = c.post(f"/v1/jobs/{src}/copy",
                   json={"overrides": {"training.hyper_parameters.learnin_rate": 1}})
        assert r.status_code == 422 and "learnin_rate" in json.dumps(r.json()["error"])
        # issue 37 item 7: a name with NUL, bidi, zero-width or line characters, named
        for bad in ("a\x00b", "run\u202egnp.exe", "zero\u200bwidth", "two\nlines"):
            r = c.post(f"/v1/jobs/{src}/copy", json={"job_name": bad})
            err = r.json()["error"]
            assert r.status_code == 422 and "job_name" in str(err["where"]), err
            assert f"U+{ord(next(ch for ch in bad if not ch.isalnum())):04X}" in err["message"]
            r = c.post(f"/v1/jobs/{src}/copy", json={"overrides": {"name": bad}})
            assert r.status_code == 422 and "name = " in r.json()["error"]["message"], r.text
        assert c.get("/v1/jobs").json()["total"] == total
        assert c.post("/v1/jobs/ft-missing/copy", json={}).status_code == 404

        # the console's way: the edited YAML (secrets masked as ***) plus a name
        yaml_text = c.get(f"/v1/jobs/{src}").json()["config_yaml"]
        edited = yaml_text.replace("n_epochs: 1", "n_epochs: 2")
        assert edited != yaml_text
        r = c.post(f"/v1/jobs/{src}/copy", json={"config_yaml": edited, "job_name": "edited"})
        assert r.status_code == 201, r.text
        c.post(f"/v1/jobs/{r.json()['job_id']}/cancel")
        cfg = c.get(f"/v1/jobs/{r.json()['job_id']}").json()["config"]
        assert cfg["training"]["hyper_parameters"]["n_epochs"] == 2 and cfg["name"] == "edited"

    # the CLI: a bare hyper-parameter name, the value read as YAML
    res = _cli("copy", src, "--set", "learning_rate=2e-4", "--set", "batch_size=1",
               "-o", "json", "--api-key", server.key)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["copied_from"] == src and out["job_id"].startswith("ft-")
    with server.client() as c:
        c.post(f"/v1/jobs/{out['job_id']}/cancel")
        hp = c.get(f"/v1/jobs/{out['job_id']}").json()["config"]["training"]["hyper_parameters"]
    assert hp["learning_rate"] == 2e-4 and hp["batch_size"] == 1
    res = _cli("copy", src, "--set", "learning_rate", "--api-key", server.key)
    assert res.exit_code != 0 and "key=value" in res.output


def test_stop_ends_a_running_job_at_a_step_with_a_checkpoint(server, tmp_path, tiny_model_dir):
    # save_strategy "no": the checkpoint it keeps is the stop's own
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=50, save_strategy="no")
    job_id = _submit(server, ws)
    job_dir = server.home / "server" / "jobs" / job_id
    with server.client() as c:
        r = c.post(f"/v1/jobs/{job_id}/stop")
        if r.status_code == 409:  # still PENDING: stop needs a step to end at
            assert "cancel it instead" in r.json()["error"]["hint"]
        _wait(c, job_id, lambda j: (j.get("progress") or {}).get("step", 0) >= 1)
        r = c.post(f"/v1/jobs/{job_id}/stop")
        assert r.status_code == 202, r.text
        assert r.json()["status"] == "RUNNING" and r.json()["stop_requested_at"]
        job = _wait(c, job_id, lambda j: j["status"] not in ("PENDING", "RUNNING"), 180)
        assert job["status"] == "STOPPED", job
        assert job["error"] is None and job["exit_code"] == 0
        result = json.loads((job_dir / "result.json").read_text())
        step = result["summary"]["stopped_by_request"]["step"]
        total = 8 // 2 * 50
        assert 1 <= step < total and result["summary"]["steps"] == step
        ckpts = c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"]
        assert [k["step"] for k in ckpts] == [step]
        log = "\n".join(c.get(f"/v1/jobs/{job_id}/logs", params={"lines": 10**5}).json()["logs"])
        assert f"the job ends at step {step} with a checkpoint" in log
        assert c.get("/v1/jobs", params={"status": "STOPPED"}).json()["total"] == 1

        # a STOPPED job: stop again → 409; its checkpoint publishes; resume continues it
        r = c.post(f"/v1/jobs/{job_id}/stop")
        assert r.status_code == 409 and "STOPPED" in r.json()["error"]["message"]
        r = c.post(f"/v1/jobs/{job_id}/publish", json={"name": "stopped-calc",
                                                       "checkpoint": "last"})
        assert r.status_code == 201 and r.json()["step"] == step, r.text
        job = c.post(f"/v1/jobs/{job_id}/resume").json()  # runs on: tests/console/test_jobops
        assert job["status"] == "PENDING" and job["resume_from"] == ckpts[0]["path"]
        assert not (job_dir / "stop_request.json").exists() and not job["stop_requested_at"]
        assert c.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "CANCELED"

    res = _cli("stop", job_id, "--api-key", server.key)  # the CLI says why not
    assert res.exit_code == 1 and "it is CANCELED" in res.output


def test_hyperparameters_form_fields():
    """What the console's new-job form is made from (served as GET /v1/hyperparameters)."""
    from rltune.config.hyperparams import HyperParameters
    from rltune.server.routes.jobops import hyperparameter_fields

    fields = hyperparameter_fields()
    assert [k["name"] for k in fields[:3]] == ["algorithm", "batch_size", "n_rollouts"]
    items = {k["name"]: k for k in fields}
    assert set(items) == set(HyperParameters.model_fields)
    lr, save, ppo = items["learning_rate"], items["save_strategy"], items["ppo_mini_batch_size"]
    assert (lr["type"], lr["minimum"], lr["maximum"], lr["default"]) == ("number", 0, 1, 1e-6)
    assert save["type"] == "choice" and save["choices"] == ["steps", "epoch", "no"]
    assert ppo["type"] == "integer" and ppo["nullable"] and ppo["default"] is None
    assert "rollouts per optimizer step" in ppo["description"]


def test_stop_waits_for_the_step_boundary(tmp_path):
    """The request is a file in the job folder; it is read, not consumed, by the trainer."""
    from rltune.jobdir import JobDir

    d = JobDir(tmp_path)
    assert d.read_stop_request() is None
    d.request_stop(requested_at=time.time(), key_id="k-1")
    assert d.read_stop_request()["key_id"] == "k-1"
    d.stop_request.write_text("{torn")
    assert d.read_stop_request() == {}
