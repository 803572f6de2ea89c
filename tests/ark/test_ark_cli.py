"""Ark's CLI verbs: `rltune ark …` and `python -m rltune.ark …` (init workspace, get
foundation-model, test pipeline_plugin locally; create/list/get/pull mcj against a real
server), and Ark's metric names next to ours."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fastapi import FastAPI, Request

from openai_edge import serve  # tests/openai_edge.py

ARK = [sys.executable, "-m", "rltune.ark"]
RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


def _env(home: Path, **more: str) -> dict[str, str]:
    env = {**os.environ, "RLTUNE_HOME": str(home), **more}
    env.pop("RLTUNE_API_KEY", None)
    return env


@pytest.fixture(scope="module")
def chat_endpoint():
    """An OpenAI-compatible endpoint (the external edge) that answers "### ANSWER: 4 ###"."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        return {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "### ANSWER: 4 ###"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}

    with serve(app) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def rl_demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("ark-cli")
    res = subprocess.run([*ARK, "init", "workspace", str(root / "ws"), "--template", "rl_demo"],
                         env=_env(root / "home"), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return root / "ws"


def test_init_both_ark_templates(rl_demo, tmp_path):
    assert (rl_demo / "job.yaml").is_file() and (rl_demo / "plugins").is_dir()
    res = subprocess.run([*RLTUNE, "ark", "init", "workspace", str(tmp_path / "s"),
                          "--template", "rl_search_mcp_demo"], env=_env(tmp_path / "h"),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "s" / "mcp_server.py").is_file()
    res = subprocess.run([*RLTUNE, "ark", "init", "workspace", str(tmp_path / "x"),
                          "--template", "calc"], env=_env(tmp_path / "h"),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "rl_demo, rl_search_mcp_demo" in res.stderr


def test_foundation_model_hyperparameters(tmp_path):
    res = subprocess.run([*ARK, "get", "foundation-model", "--model", "nano", "--fields",
                          "hyperparameters", "-o", "json"], env=_env(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    hp = {h["name"]: h for h in json.loads(res.stdout)["hyperparameters"]}
    assert hp["num_generations"]["rltune"] == "n_rollouts"
    assert hp["num_generations"]["range"] == {"ge": 1, "le": 1024}
    assert hp["lr"]["rltune"] == "learning_rate" and hp["clip_ratio_high"]["default"] == 0.2
    assert hp["max_new_tokens"]["default"] > 0


def test_pipeline_plugin_with_arks_request_shape(rl_demo, chat_endpoint, tmp_path):
    env = _env(tmp_path)
    request = {"context": {"phase": "test"}, "proxy": {"url": chat_endpoint, "jwt_token": "k"},
               "sample": {"model": "m", "messages": [{"role": "user", "content": "2+2?"}],
                          "extra": {"answer": "4"}}}
    res = subprocess.run([*RLTUNE, "ark", "test", "pipeline_plugin", "--fn",
                          "rltune.ark.builtin:single_turn", "--request", json.dumps(request)],
                         cwd=rl_demo, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["status"] == "success"
    trajectory = out["trajectory"]
    assert trajectory["messages"][-1]["content"] == "### ANSWER: 4 ###"
    assert trajectory["usage"]["total_tokens"] == 8
    grade = {"sample": request["sample"], "trajectory": trajectory}
    res = subprocess.run([*ARK, "test", "pipeline_plugin", "--fn",
                          "plugins.exact_grader:exact_grader", "--request", json.dumps(grade)],
                         cwd=rl_demo, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rewards"] == [1.0]
    res = subprocess.run([*ARK, "test", "pipeline_plugin", "--fn",
                          "plugins.exact_grader:exact_grader", "--request", "{}"],
                         cwd=rl_demo, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "'sample'" in res.stderr


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A real job server (tests/server/conftest.py) in this test's home."""
    from server.conftest import start_server  # tests/server/conftest.py

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("RLTUNE_HOME", str(home))
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    srv = start_server(home)
    yield srv
    srv.kill()


@pytest.mark.slow  # about a minute on a busy 2-core box (the job trains meanwhile)
def test_mcj_verbs_against_a_server(rl_demo, server, tiny_model_dir, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for item in ("plugins", "data"):
        shutil.copytree(rl_demo / item, ws / item)
    job = yaml.safe_load((rl_demo / "job.yaml").read_text())
    job["model_reference"]["foundation_model"]["name"] = str(tiny_model_dir)
    job["project"], job["tags"] = "agents", [{"key": "team", "value": "calc"}]
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    env = _env(server.home, RLTUNE_BASE_URL=server.url)

    def ark(*args):
        return subprocess.run([*ARK, *args], cwd=ws, env=env, capture_output=True, text=True,
                              timeout=300)

    res = ark("create", "mcj", "-f", "job.yaml", "-o", "json")
    assert res.returncode == 0, res.stderr
    job_id = json.loads(res.stdout)["id"]
    res = ark("list", "mcj", "-ps", "5", "-pn", "1", "-t", "GRPO", "-o", "json")
    listed = json.loads(res.stdout)
    assert [j["id"] for j in listed["items"]] == [job_id], res.stderr
    assert listed["items"][0]["project"] == "agents"
    res = ark("list", "mcj", "-p", "Completed", "-o", "json")
    assert (res.returncode == 0 and job_id not in res.stdout) or "SUCCEEDED" in res.stdout
    res = ark("get", "mcj", job_id, "-o", "json")
    got = json.loads(res.stdout)
    assert got["job_id"] == job_id and got["tags"] == {"team": "calc"}
    res = ark("pull", "mcj", job_id, "-d", str(tmp_path / "pulled"), "--include-data")
    assert res.returncode == 0, res.stderr
    pulled = tmp_path / "pulled"
    pulled_job = yaml.safe_load((pulled / "job.yaml").read_text())
    assert pulled_job["project"] == "agents" and "custom_rl_pipeline" in pulled_job
    assert (pulled / "plugins" / "calc_rollout.py").is_file()
    assert sorted(p.name for p in (pulled / "data").iterdir()) == ["train.jsonl", "val.jsonl"]
    assert (pulled / "data" / "train.jsonl").read_bytes() == (
        rl_demo / "data" / "train.jsonl").read_bytes()
    res = ark("pull", "mcj", job_id, "-d", str(tmp_path / "bare"), "--exclude-plugin")
    assert res.returncode == 0 and sorted(p.name for p in (tmp_path / "bare").iterdir()) == [
        "job.yaml"]
    with server.client() as c:
        c.post(f"/v1/jobs/{job_id}/cancel")


def test_login_saves_the_url_and_key_the_verbs_use(server, tmp_path):
    """`ark login` as the docs run it (prompts answered on stdin), from a home with no local
    server: the key is checked first, saved 0600, and the verbs then find the server by it."""
    home = tmp_path / "client-home"
    env = _env(home)
    env.pop("RLTUNE_BASE_URL", None)

    def ark(*args, stdin=""):
        return subprocess.run([*ARK, *args], env=env, input=stdin, capture_output=True,
                              text=True, timeout=120, start_new_session=True)  # no tty

    res = ark("login", stdin=f"{server.url}\nrlt-not-a-key\n")
    assert res.returncode == 1 and "invalid or revoked API key" in res.stderr
    assert not (home / "login.json").exists()
    res = ark("login", stdin=f"{server.url}\n{server.key}\n")
    assert res.returncode == 0, res.stderr
    assert "workspace 'default', admin" in res.stdout and server.key not in res.stdout
    saved = home / "login.json"
    assert json.loads(saved.read_text()) == {"url": server.url, "api_key": server.key}
    assert saved.stat().st_mode & 0o777 == 0o600
    res = ark("list", "mcj", "-o", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["total"] == 0
    # the saved key goes only to the server it was saved with
    from rltune.client import discovery

    os.environ["RLTUNE_HOME"] = str(home)  # the server fixture's monkeypatch restores it
    assert discovery.api_key(required=False) == server.key
    assert discovery.api_key(required=False, url="http://127.0.0.1:9") is None
    res = ark("logout")
    assert res.returncode == 0 and not saved.exists()
    res = ark("login", "--url", "ftp://x", "--api-key", "k")
    assert res.returncode == 2 and "is not an http(s) URL" in res.stderr
