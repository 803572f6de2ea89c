"""What a tenant's job config can point at on a real server with two workspaces: models of
other workspaces, tracker folders and stores, loopback download targets, unreachable trackers,
Ark plugins in the server's folder, odd workspace names; and errors that name no server path."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from typing import ClassVar

import httpx
import pytest

from .conftest import start_server, zip_bytes

ROW = b'{"messages": [{"role": "user", "content": "1+1"}], "rollout_extra": {"answer": "2"}}\n'
CODE = ("from rltune.sdk import AbstractRewardProcessor\n"
        "class R(AbstractRewardProcessor):\n"
        "    async def process(self, data):\n        return None\n")


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """A server serving workspaces 'team-a' and 'team-b' (keys of each), run from a folder
    holding a Python file (what an Ark ``python_func`` could probe)."""
    root = tmp_path_factory.mktemp("reach")
    home = root / "home"
    home.mkdir()
    cwd = root / "cwd"
    (cwd / "plugins").mkdir(parents=True)
    (cwd / "plugins" / "present.py").write_text("def grade(x):\n    return 1\n")
    import os

    old = os.getcwd()
    os.chdir(cwd)  # the server process starts here
    try:
        srv = start_server(home, "--allow-unisolated")
    finally:
        os.chdir(old)
    with srv.client() as admin:
        keys = {ws: admin.post("/v1/keys", json={"workspace": ws}).json()["api_key"]
                for ws in ("team-a", "team-b")}
    yield srv, keys
    srv.kill()


def _model_dir(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"max_position_embeddings": 1024}))
    return path


def _ids(c: httpx.Client) -> dict:
    f = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW * 4)
    rw = c.post("/v1/functions", params={"classpath": "r.py:R", "type": "reward"},
                content=zip_bytes({"r.py": CODE}))
    assert f.status_code == 201 and rw.status_code == 201, (f.text, rw.text)
    return {"file": f.json()["file_id"], "rw": rw.json()["entity_id"]}


def _config(ids: dict, model: str, **extra) -> dict:
    return {"model": model, "datasets": [{"type": "training", "file_id": ids["file"]}],
            "functions": [{"type": "reward", "name": "rw", "entity_id": ids["rw"]}],
            "training": {"hyper_parameters": {"batch_size": 2, "n_rollouts": 2,
                                              "max_prompt_length": 100, "max_length": 200}},
            **extra}


def _accepted(c: httpx.Client, r: httpx.Response) -> None:
    assert r.status_code == 201, r.text
    c.post(f"/v1/jobs/{r.json()['job_id']}/cancel")  # it was only about being accepted


def test_model_paths_into_other_workspaces_are_refused(two):
    """Item 4: another workspace's published weights, the default workspace's by bare name and
    other jobs' checkpoints answer 404; the caller's own published model is accepted."""
    srv, keys = two
    home = srv.home
    _model_dir(home / "published" / "team-b" / "secret")
    _model_dir(home / "published" / "default" / "shared")
    _model_dir(home / "server" / "jobs" / "ft-0123456789abcdef" / "checkpoints" / "checkpoint-1")
    own = _model_dir(home / "published" / "team-a" / "mine")
    with srv.client(keys["team-a"]) as c:
        ids = _ids(c)
        for spec in (str(home / "published" / "team-b" / "secret"),
                     str(home / "published" / "team-a" / ".." / "team-b" / "secret"),
                     "shared",
                     str(home / "server" / "jobs" / "ft-0123456789abcdef" / "checkpoints" /
                         "checkpoint-1")):
            r = c.post("/v1/jobs", json={"config": _config(ids, spec)})
            assert r.status_code == 404, (spec, r.text)
            err = r.json()["error"]
            assert err["where"] == "model.name", r.text
            assert str(home) not in r.text  # item 18: no server path in the answer
        _accepted(c, c.post("/v1/jobs", json={"config": _config(ids, str(own))}))
    with srv.client() as default:  # the default workspace still uses its own by name
        _accepted(default, default.post("/v1/jobs", json={"config": _config(_ids(default),
                                                                            "shared")}))


def test_a_failed_jobs_error_shows_no_server_path(two):
    """Item 18: the job's own error (a weightless model under $RLTUNE_HOME) is shown with
    the server's folder hidden."""
    srv, keys = two
    weightless = _model_dir(srv.home / "published" / "team-b" / "hollow")
    (weightless / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "max_position_embeddings": 1024}))
    with srv.client(keys["team-b"]) as c:
        r = c.post("/v1/jobs", json={"config": _config(_ids(c), str(weightless))})
        assert r.status_code == 201, r.text
        job_id = r.json()["job_id"]
        deadline = time.monotonic() + 180
        while (job := c.get(f"/v1/jobs/{job_id}").json())["status"] not in ("FAILED",
                                                                             "SUCCEEDED"):
            assert time.monotonic() < deadline, job
            time.sleep(0.5)
    assert job["status"] == "FAILED" and "$RLTUNE_HOME/published" in job["error"], job
    assert str(srv.home) not in job["error"], job["error"]


@pytest.mark.parametrize("tracker, field", [
    ({"type": "tensorboard", "dir": "../../.."}, "dir"),
    ({"type": "tensorboard", "dir": "/tmp/elsewhere"}, "dir"),
    ({"type": "wandb", "dir": "~/x"}, "dir"),
    ({"type": "mlflow", "uri": "sqlite:////var/tmp/other.db"}, "uri"),
    ({"type": "mlflow", "uri": "sqlite:///../../other.db"}, "uri"),
    ({"type": "mlflow", "uri": "file:///tmp/mlruns"}, "uri"),
    ({"type": "mlflow", "uri": "postgresql://db/x"}, "uri"),
])
def test_tracker_dir_and_uri_stay_in_the_job_folder(two, tracker, field):
    """Item 7: a tracker's dir and uri cannot leave the job folder on the server."""
    srv, keys = two
    with srv.client(keys["team-a"]) as c:
        r = c.post("/v1/jobs", json={"config": _config(
            _ids(c), "nano", observability={"trackers": [tracker]})})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["where"] == f"observability.trackers[0].{field}", r.text


def test_tracker_folders_inside_the_job_are_accepted(two):
    srv, keys = two
    with srv.client(keys["team-a"]) as c:
        r = c.post("/v1/jobs", json={"config": _config(_ids(c), "nano", observability={
            "trackers": [{"type": "tensorboard", "dir": "tb/run-1"},
                         {"type": "mlflow", "uri": "sqlite:///mlflow-2.db"}]})})
        _accepted(c, r)


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list] = []

    def do_GET(self):  # any request at all is the failure; what it answers does not matter
        self.hits.append(self.path)
        self.send_error(418)

    def log_message(self, *args):
        pass


def test_download_url_to_loopback_is_refused_without_a_request(two):
    """Item 8: the server refuses a loopback target; the loopback server receives nothing."""
    srv, keys = two
    handler = type("H", (_Counting,), {"hits": []})
    http_srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=http_srv.serve_forever, daemon=True).start()
    port = http_srv.server_address[1]
    try:
        with srv.client(keys["team-a"]) as c:
            ids = _ids(c)
            for url in (f"http://127.0.0.1:{port}/t.jsonl", f"http://localhost:{port}/t.jsonl",
                        f"{srv.url}/health", f"http://[::ffff:127.0.0.1]:{port}/t.jsonl"):
                config = _config(ids, "nano")
                config["datasets"] = [{"type": "training", "data_source_type": "download_url",
                                       "download_url": url}]
                r = c.post("/v1/jobs", json={"config": config})
                assert r.status_code == 422, (url, r.text)
                err = r.json()["error"]
                assert err["where"] == "datasets[0].download_url", r.text
                assert "loopback" in err["message"] and "RLTUNE_URL_ALLOW_NETWORKS" in err["hint"]
        assert handler.hits == []
    finally:
        http_srv.shutdown()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when this returns: connections are refused


def test_unreachable_mlflow_fails_at_submit_in_seconds(server_home, monkeypatch):
    """Item 12: an MLflow server that does not answer refuses the job in seconds (naming the
    uri), where the job used to hold its slot for minutes of retries."""
    monkeypatch.setenv("RLTUNE_URL_ALLOW_NETWORKS", "127.0.0.0/8")  # the test's MLflow
    srv = start_server(server_home)
    try:
        with srv.client() as c:
            uri = f"http://127.0.0.1:{_closed_port()}"
            t0 = time.monotonic()
            r = c.post("/v1/jobs", json={"config": _config(_ids(c), "nano", observability={
                "trackers": [{"type": "mlflow", "uri": uri}]})})
            took = time.monotonic() - t0
            assert r.status_code == 422, r.text
            err = r.json()["error"]
            assert err["where"] == "observability.trackers[0].uri"
            assert "not reachable" in err["message"] and uri in err["message"]
            assert took < 10, took
            assert c.get("/v1/jobs").json()["total"] == 0
    finally:
        srv.kill()


def test_mlflow_uri_to_a_private_address_is_refused(two):
    srv, keys = two
    with srv.client(keys["team-a"]) as c:
        r = c.post("/v1/jobs", json={"config": _config(_ids(c), "nano", observability={
            "trackers": [{"type": "mlflow", "uri": "http://169.254.169.254/"}]})})
        assert r.status_code == 422, r.text
        assert "link-local" in r.json()["error"]["message"]


def _ark_yaml(func: str) -> str:
    return ("name: ark\ncustomization_type: GRPO\nmodel_reference:\n  foundation_model:\n"
            "    name: nano\ndata:\n  training_set:\n    local_files: [t.jsonl]\n"
            "custom_rl_pipeline:\n  graders:\n    - plugin:\n"
            f"        python_func: {func}\n")


def test_ark_yaml_is_refused_before_any_file_is_read(two):
    """Item 16: the answer is the same whether python_func names a file in the server's
    folder or not (no existence or syntax oracle), and says what to do instead."""
    srv, keys = two
    with srv.client(keys["team-a"]) as c:
        present = c.post("/v1/jobs", json={"config_yaml": _ark_yaml("plugins.present:grade")})
        absent = c.post("/v1/jobs", json={"config_yaml": _ark_yaml("plugins.absent:grade")})
        as_dict = c.post("/v1/jobs", json={"config": {
            "customization_type": "GRPO", "custom_rl_pipeline": {"graders": [
                {"plugin": {"python_func": "plugins.present:grade"}}]}}})
    assert present.status_code == absent.status_code == 422, present.text
    assert present.json() == absent.json()
    err = present.json()["error"]
    assert "Ark" in err["message"] and err["where"] == "config_yaml:2", err
    assert as_dict.status_code == 422 and "Ark" in as_dict.json()["error"]["message"]


@pytest.mark.parametrize("name", [".", "..", "a/b", "-x", "a b", "x.", "ü"])
def test_workspace_names_are_identifiers(two, name):
    """Item 15: '.', '..' and other non-identifiers are refused when a key is made."""
    srv, _ = two
    with srv.client() as admin:
        r = admin.post("/v1/keys", json={"workspace": name})
        assert r.status_code == 422, (name, r.text)
        assert r.json()["error"]["where"] == "body.workspace"
        assert admin.post("/v1/keys", json={"workspace": "team_c-1"}).status_code == 201


def test_idempotency_replay_after_delete_is_a_conflict(two):
    """Item 17: replaying a create whose result was deleted does not hand out the dead id."""
    srv, keys = two
    with srv.client(keys["team-b"]) as c:
        h = {"Idempotency-Key": "upload-1"}
        first = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW, headers=h)
        again = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW, headers=h)
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.json()["file_id"] == first.json()["file_id"]
        assert c.delete(f"/v1/files/{first.json()['file_id']}").status_code == 200
        r = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW, headers=h)
        assert r.status_code == 409 and "deleted" in r.json()["error"]["message"], r.text
        ids = _ids(c)
        h = {"Idempotency-Key": "job-1"}
        job = c.post("/v1/jobs", json={"config": _config(ids, "nano")}, headers=h)
        assert job.status_code == 201, job.text
        job_id = job.json()["job_id"]
        c.post(f"/v1/jobs/{job_id}/cancel")
        assert c.delete(f"/v1/jobs/{job_id}").status_code == 200
        r = c.post("/v1/jobs", json={"config": _config(ids, "nano")}, headers=h)
        assert r.status_code == 409 and job_id in r.json()["error"]["message"], r.text


def test_evaluation_threshold_must_be_a_number(two):
    """Item 17: NaN and infinities are refused (JSON from Python's encoder can carry them)."""
    srv, keys = two
    with srv.client(keys["team-b"]) as c:
        for value in ("NaN", "Infinity", "-Infinity"):
            r = c.post("/v1/evaluations", headers={"Content-Type": "application/json"},
                       content='{"job_id": "ft-0000000000000000", "threshold": ' + value + "}")
            assert r.status_code == 422, (value, r.text)
            assert "threshold" in r.json()["error"]["where"]


def test_console_answers_carry_security_headers(two):
    """Item 18: the console's page and assets set CSP, X-Frame-Options and nosniff."""
    srv, _ = two
    for path in ("/", "/console/app.js"):
        r = httpx.get(srv.url + path)
        assert r.status_code == 200, path
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
