"""Keys, secrets at rest, masking, submit-time checks and auth order, on a real server."""

from __future__ import annotations

import json
import sqlite3

import httpx

from rltune.server.context import ServerContext
from rltune.server.settings import ServerSettings

from .conftest import start_server, zip_bytes

ROW = b'{"messages": [{"role": "user", "content": "1+1"}], "rollout_extra": {"answer": "2"}}\n'
CODE = ("from rltune.sdk import AbstractRewardProcessor\n"
        "class R(AbstractRewardProcessor):\n"
        "    async def process(self, data):\n        return None\n")


def _ids(c: httpx.Client) -> dict:
    f = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW * 4).json()
    ro = c.post("/v1/functions", params={"classpath": "r.py:R", "type": "rollout"},
                content=zip_bytes({"r.py": CODE})).json()
    rw = c.post("/v1/functions", params={"classpath": "r.py:R", "type": "reward"},
                content=zip_bytes({"r.py": CODE})).json()
    return {"file": f["file_id"], "ro": ro["entity_id"], "rw": rw["entity_id"]}


def _config(ids: dict, model: str, **hp) -> dict:
    return {"model": model, "datasets": [{"type": "training", "file_id": ids["file"]}],
            "functions": [
                {"type": "rollout", "name": "ro", "entity_id": ids["ro"],
                 "runtime": {"env": {"OPENAI_API_KEY": "sk-very-secret"}}},
                {"type": "reward", "name": "rw", "entity_id": ids["rw"]}],
            "training": {"hyper_parameters": {"batch_size": 2, "n_rollouts": 2,
                                              "max_prompt_length": 100, "max_length": 200,
                                              **hp}}}


def test_only_an_admin_lists_or_revokes_other_keys(server):
    with server.client() as admin:
        me = admin.get("/v1/whoami").json()
        user = admin.post("/v1/keys", json={"name": "user"}).json()
        peer = admin.post("/v1/keys", json={"name": "peer"}).json()
    with server.client(user["api_key"]) as u:
        listed = [k["key_id"] for k in u.get("/v1/keys").json()["items"]]
        assert listed == [user["key_id"]]
        for victim in (me["key_id"], peer["key_id"]):
            r = u.delete(f"/v1/keys/{victim}")
            assert r.status_code == 404, r.text
    with server.client() as admin:
        assert admin.get("/v1/whoami").status_code == 200  # the admin key still works
        listed = {k["key_id"] for k in admin.get("/v1/keys").json()["items"]}
        assert {me["key_id"], user["key_id"], peer["key_id"]} <= listed
        assert admin.delete(f"/v1/keys/{peer['key_id']}").status_code == 200
    with server.client(user["api_key"]) as u:  # a key may revoke itself
        assert u.delete(f"/v1/keys/{user['key_id']}").status_code == 200
        assert u.get("/v1/whoami").status_code == 401


def test_secrets_are_not_stored_and_state_is_private(server):
    with server.client() as admin:
        h = {"Idempotency-Key": "make-key-1"}
        first = admin.post("/v1/keys", json={"name": "k"}, headers=h).json()
        again = admin.post("/v1/keys", json={"name": "k"}, headers=h)
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.json()["key_id"] == first["key_id"] and again.json()["api_key"] is None
        ids = _ids(admin)
        job = admin.post("/v1/jobs", json={"config": _config(ids, "nano")})
        assert job.status_code == 201, job.text
        detail = admin.get(f"/v1/jobs/{job.json()['job_id']}").json()
        assert "sk-very-secret" not in json.dumps(detail)
        env = detail["config"]["functions"][0]["runtime"]["env"]
        assert env == {"OPENAI_API_KEY": "***"}
        assert all("config" not in j for j in admin.get("/v1/jobs").json()["items"])
    db = server.home / "server" / "rltune.db"
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    assert first["api_key"] not in dump and server.key not in dump
    assert "sk-very-secret" not in dump  # the config lives in the job's folder, not the store
    for path in (db, server.home / "server" / "admin.key"):
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert (server.home / "server").stat().st_mode & 0o777 == 0o700


def test_submit_refuses_duplicate_keys_unknown_models_and_long_contexts(server, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 1024}))
    with server.client() as c:
        ids = _ids(c)
        r = c.post("/v1/jobs", json={"config_yaml": "model: nano\nname: a\nmodel: x\n"})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["where"] == "config_yaml:3" and "lines 1 and 3" in err["message"]
        r = c.post("/v1/jobs", json={"config": _config(ids, "/etc")})
        assert r.status_code == 404 and r.json()["error"]["where"] == "model.name", r.text
        r = c.post("/v1/jobs", json={"config": _config(ids, str(model), max_length=8192)})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["where"] == "training.hyper_parameters.max_length"
        assert "8192" in err["message"] and "1024" in err["message"]
        assert c.post("/v1/jobs", json={"config": _config(ids, str(model))}).status_code == 201


def test_a_request_without_a_key_gets_401_before_its_body_is_read(server):
    for body in (b"{not json", b'{"config": 5}', b"\xff" * 10):
        r = httpx.post(server.url + "/v1/jobs", content=body, timeout=10,
                       headers={"Content-Type": "application/json"})
        assert r.status_code == 401, r.text


def test_several_workspaces_need_isolation_or_an_opt_in(server_home, monkeypatch):
    monkeypatch.setenv("RLTUNE_FUNCTION_ISOLATION", "none")
    srv = start_server(server_home)
    try:
        assert httpx.get(srv.url + "/health").json()["function_isolation"] == "none"
        with srv.client() as c:
            r = c.post("/v1/keys", json={"workspace": "team-b"})
            assert r.status_code == 409 and "--allow-unisolated" in r.json()["error"]["hint"]
            assert c.post("/v1/keys", json={"name": "same-workspace"}).status_code == 201
    finally:
        srv.kill()
    log = (server_home / "server.log").read_text()
    assert "WITHOUT a sandbox" in log and "only the 'default' workspace" in log
    # --allow-unisolated / RLTUNE_ALLOW_UNISOLATED=1 lifts the refusal (and warns at start)
    ctx = ServerContext(ServerSettings(home=server_home, allow_unisolated=True), *[None] * 4,
                        isolation="none")
    ctx.check_isolated("a key for workspace 'team-b'")
    assert ServerSettings.from_env().allow_unisolated is False
    monkeypatch.setenv("RLTUNE_ALLOW_UNISOLATED", "1")
    assert ServerSettings.from_env().allow_unisolated is True
