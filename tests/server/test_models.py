"""Published models and deployments on the tiny model under a real server (default run).

One short job with ``tuned_model_name``: it auto-publishes; publish by step; list, show,
export; another workspace gets 404; a deployment serves two models routed by ``model`` to
the official ``openai`` client; the server restarts and recovers it; deleting the source job
leaves the model served; delete refuses while served.
"""

from __future__ import annotations

import signal
import time

import pytest
import yaml

from .conftest import make_workspace, start_server
from .test_lifecycle import _submit, _wait


def _until(get, cond, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        rec = get()
        if cond(rec):
            return rec
        assert time.monotonic() < deadline and rec.get("status") != "FAILED", rec
        time.sleep(0.3)


def _finished_job(server_home, tmp_path, tiny_model_dir, **hp):
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=1, **hp)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["tuned_model_name"] = "calc-auto"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    srv = start_server(server_home)
    job_id = _submit(srv, ws)
    with srv.client() as c:
        done = _wait(c, job_id, lambda j: j["status"] in ("SUCCEEDED", "FAILED"))
        assert done["status"] == "SUCCEEDED", done
    return srv, job_id


@pytest.fixture
def finished(server_home, tmp_path, tiny_model_dir):
    srv, job_id = _finished_job(server_home, tmp_path, tiny_model_dir)  # 4 steps
    yield srv, job_id
    srv.kill(signal.SIGTERM)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """A local hub endpoint; the server (started after this) gets its token and URL."""
    from .fake_hub import start

    url, server = start(tmp_path / "hub", "hf-test-token")
    monkeypatch.setenv("HF_TOKEN", "hf-test-token")
    monkeypatch.setenv("HF_ENDPOINT", url)
    yield tmp_path / "hub"
    server.should_exit = True


@pytest.fixture
def short_job(fake_hub, server_home, tmp_path, tiny_model_dir):
    srv, job_id = _finished_job(server_home, tmp_path, tiny_model_dir, batch_size=8,
                                eval_steps=1)  # 1 step, saved and validated
    yield srv, job_id
    srv.kill(signal.SIGTERM)


def test_publish_list_export_delete_job_and_other_workspace(short_job, fake_hub, tmp_path):
    """Default run: auto-publish, publish by step / best, names, files, export, 404s, and the
    model outliving its job."""
    from rltune.client import AgenticRL

    srv, job_id = short_job
    with srv.client() as c:
        other = srv.client(c.post("/v1/keys", json={"workspace": "other"}).json()["api_key"])
        # the end-of-job hook runs right after the job is marked SUCCEEDED
        _until(lambda: c.get(f"/v1/jobs/{job_id}").json(), lambda j: j["published_model"], 10)
        auto = c.get("/v1/models/calc-auto").json()
        ckpts = c.get(f"/v1/jobs/{job_id}/checkpoints").json()["checkpoints"]
        best = max(ckpts, key=lambda k: (k["validation_reward"], k["step"]))
        assert auto["source_job"] == job_id and auto["auto"] is True
        assert auto["checkpoint"] == best["name"]
        job = c.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "SUCCEEDED" and job["published_model"] == "calc-auto"
        sdk = AgenticRL(api_key=srv.key, base_url=srv.url)
        first = sdk.publish_model(job_id, "calc-s1", checkpoint=1)
        assert first["step"] == 1 and first["kind"] == "full"
        assert first["base_model"] == c.get(f"/v1/jobs/{job_id}").json()["model"]
        assert c.post("/v1/models", json={"job_id": job_id, "name": "calc-s1"}).status_code == 409
        r = c.post(f"/v1/jobs/{job_id}/publish", json={"name": "x", "checkpoint": 99})
        assert r.status_code == 404 and "steps saved: 1" in r.json()["error"]["hint"]
        assert c.post(f"/v1/jobs/{job_id}/publish", json={"name": "a b"}).status_code == 422
        # the CLI: publish, list, show as JSON (server found through RLTUNE_HOME)
        import json

        from typer.testing import CliRunner

        from rltune.cli.main import app

        cli = CliRunner()
        res = cli.invoke(app, ["models", "publish", job_id, "--checkpoint", "last", "--name",
                               "calc-cli", "-o", "json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["checkpoint"] == ckpts[-1]["name"]
        res = cli.invoke(app, ["models", "show", "calc-cli", "-o", "json"])
        assert res.exit_code == 0 and json.loads(res.output)["source_job"] == job_id
        res = cli.invoke(app, ["models", "publish", job_id, "--name", "calc-cli"])
        assert res.exit_code == 1 and "exists" in res.output
        assert cli.invoke(app, ["models", "delete", "calc-cli"]).exit_code == 0
        files = {f["path"] for f in sdk.get_model("calc-s1")["files"]}
        assert {"config.json", "model.safetensors"} <= files
        assert not files & {"training_state.pt", "rng_state.pt"}
        assert [m["name"] for m in sdk.list_models()["items"]] == ["calc-s1", "calc-auto"]
        for method, path in (("GET", "/v1/models/calc-s1"), ("DELETE", "/v1/models/calc-s1"),
                             ("GET", "/v1/models/calc-s1/export")):
            assert other.request(method, path).status_code == 404
        assert other.post(f"/v1/jobs/{job_id}/publish", json={"name": "y"}).status_code == 404
        assert other.post("/v1/deployments", json={"models": ["calc-s1"]}).status_code == 404
        assert other.post("/v1/evaluations", json={"job_id": job_id}).status_code == 404
        assert other.get("/v1/models").json()["total"] == 0
        r = c.post("/v1/deployments", json={"models": ["calc-s1", "missing"]})
        assert r.status_code == 404 and r.json()["error"]["where"] == "missing"
        r = c.post("/v1/evaluations", json={"job_id": job_id, "n": 2, "k": 4})
        assert r.status_code == 422 and r.json()["error"]["where"] == "k"
        # the source job goes; the model stays whole (its files were linked, not moved)
        ckpt_weights = (srv.home / "server" / "jobs" / job_id / "checkpoints" / "checkpoint-1"
                        / "model.safetensors").read_bytes()
        assert c.delete(f"/v1/jobs/{job_id}").status_code == 200
        out = sdk.export_model("calc-s1", tmp_path / "export")
        assert (out / "model.safetensors").read_bytes() == ckpt_weights
        assert (out / "config.json").is_file()
        # push_to_hub with the server's token, to the local hub endpoint
        pushed = sdk.push_model("calc-s1", "me/calc-s1")
        assert pushed["commit_url"].endswith("/me/calc-s1/commit/" + "a" * 40)
        assert (fake_hub / "me" / "calc-s1" / "model.safetensors").read_bytes() == ckpt_weights
        assert other.post("/v1/models/calc-s1/push", json={"repo_id": "me/x"}).status_code == 404
        r = c.post("/v1/models/calc-s1/push", json={"repo_id": "me/x", "part": "adapter"})
        assert r.status_code == 422 and "full fine-tune" in r.json()["error"]["message"]
        r = c.get("/v1/models/calc-s1/export", params={"part": "adapter"})
        assert r.status_code == 422 and "full fine-tune" in r.json()["error"]["message"]
        assert c.delete("/v1/models/calc-s1").status_code == 200
        assert c.get("/v1/models/calc-s1").status_code == 404
        assert not (srv.home / "published" / "default" / "calc-s1").exists()


@pytest.mark.slow
def test_publish_deploy_restart_delete(finished, tmp_path):
    import openai

    srv, job_id = finished
    with srv.client() as c:
        other_key = c.post("/v1/keys", json={"workspace": "other"}).json()["api_key"]
        other = srv.client(other_key)
        # auto-published at the end of the job
        auto = _until(lambda: c.get("/v1/models/calc-auto").json(), lambda m: "name" in m, 10)
        assert auto["source_job"] == job_id and auto["auto"] is True
        assert c.get(f"/v1/jobs/{job_id}").json()["status"] == "SUCCEEDED"
        # publish a step; names are unique; bad checkpoints are named
        r = c.post("/v1/models", json={"job_id": job_id, "name": "calc-s2", "checkpoint": 4})
        assert r.status_code == 201, r.text
        assert r.json()["step"] == 4 and r.json()["checkpoint"] == "checkpoint-4"
        r = c.post("/v1/models", json={"job_id": job_id, "name": "calc-s2"})
        assert r.status_code == 409
        r = c.post(f"/v1/jobs/{job_id}/publish", json={"name": "x", "checkpoint": 99})
        assert r.status_code == 404 and "steps saved" in r.json()["error"]["hint"]
        r = c.post(f"/v1/jobs/{job_id}/publish", json={"name": "bad name"})
        assert r.status_code == 422
        shown = c.get("/v1/models/calc-s2").json()
        assert {"config.json", "model.safetensors"} <= {f["path"] for f in shown["files"]}
        assert not any(f["path"].endswith("training_state.pt") for f in shown["files"])
        # export: a Hugging Face folder; the adapter alone only for LoRA
        from rltune.client import AgenticRL

        sdk = AgenticRL(api_key=srv.key, base_url=srv.url)
        out = sdk.export_model("calc-s2", tmp_path / "export")
        from transformers import AutoModelForCausalLM

        assert AutoModelForCausalLM.from_pretrained(out).num_parameters() > 0
        assert c.get("/v1/models/calc-s2/export", params={"part": "adapter"}).status_code == 422
        # another workspace: 404 everywhere
        for method, path in (("GET", "/v1/models/calc-s2"), ("DELETE", "/v1/models/calc-s2"),
                             ("GET", "/v1/models/calc-s2/export")):
            assert other.request(method, path).status_code == 404
        assert other.post(f"/v1/jobs/{job_id}/publish", json={"name": "y"}).status_code == 404
        assert other.post("/v1/deployments", json={"models": ["calc-s2"]}).status_code == 404
        assert other.get("/v1/models").json()["total"] == 0
        # one deployment, two models, routed by `model`
        dep = c.post("/v1/deployments", json={"models": ["calc-s2", "calc-auto"]}).json()
        dep_id, key = dep["deployment_id"], dep["api_key"]
        dep = _until(lambda: c.get(f"/v1/deployments/{dep_id}").json(),
                     lambda d: d["status"] == "RUNNING")
        assert other.get(f"/v1/deployments/{dep_id}").status_code == 404
        assert other.post(f"/v1/deployments/{dep_id}/stop").status_code == 404
        client = openai.OpenAI(base_url=dep["base_url"], api_key=key, max_retries=0)
        assert {m.id for m in client.models.list()} == {"calc-s2", "calc-auto"}
        for model in ("calc-s2", "calc-auto"):
            resp = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "What is 2 + 3?"}],
                max_tokens=4, logprobs=True)
            assert resp.model == model and resp.choices[0].logprobs.content
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="nope", messages=[{"role": "user",
                                                                    "content": "x"}])
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=dep["base_url"], api_key=srv.key,
                          max_retries=0).models.list()
        # the playground's proxy: workspace key in, deployment answers
        r = c.post(f"/v1/deployments/{dep_id}/chat/completions", json={
            "model": "calc-auto", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3})
        assert r.status_code == 200 and r.json()["model"] == "calc-auto"
        assert c.delete("/v1/models/calc-s2").status_code == 409  # served
    # restart: the deployment comes back with the same keys
    srv.kill(signal.SIGTERM)
    srv = start_server(srv.home)
    try:
        with srv.client() as c:
            dep = _until(lambda: c.get(f"/v1/deployments/{dep_id}").json(),
                         lambda d: d["status"] == "RUNNING")
            client = openai.OpenAI(base_url=dep["base_url"], api_key=key, max_retries=0)
            # deleting the source job leaves the published models working
            assert c.delete(f"/v1/jobs/{job_id}").status_code == 200
            resp = client.chat.completions.create(
                model="calc-s2", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
            assert resp.choices[0].message is not None
            stopped = c.post(f"/v1/deployments/{dep_id}/stop").json()
            assert stopped["status"] == "STOPPED"
            with pytest.raises(openai.APIConnectionError):
                client.models.list()
            assert c.delete("/v1/models/calc-s2").status_code == 200
            assert c.get("/v1/models/calc-s2").status_code == 404
            assert not (srv.home / "published" / "default" / "calc-s2").exists()
    finally:
        srv.kill(signal.SIGTERM)
