"""The audit log against a real server: every state-changing route (walked from the app) writes
exactly one record, another workspace cannot read it, no secret is in it, and it survives a
restart."""

from __future__ import annotations

import json
import re
import signal

from rltune.server.app import create_app
from rltune.server.audit import state_changing_routes
from rltune.server.settings import ServerSettings
from server.conftest import start_server  # tests/server/conftest.py


def _audit(client, **params) -> list[dict]:
    res = client.get("/v1/audit", params={"page_size": 500, **params})
    assert res.status_code == 200, res.text
    return res.json()["items"]


def test_every_state_changing_route_writes_one_record_no_secret_no_other_workspace(
        server_home, tmp_path):
    routes = state_changing_routes(create_app(ServerSettings(home=tmp_path / "walk")))
    assert len(routes) >= 25  # keys, files, functions, jobs, models, deployments, evaluations
    srv = start_server(server_home, "--allow-unisolated")
    try:
        with srv.client() as admin:
            team = admin.post("/v1/keys", json={"name": "team-b", "workspace": "team-b"}).json()
            mine = admin.post("/v1/keys", json={"name": "mine"}).json()
            upload = admin.post("/v1/files", params={"filename": "d.jsonl"},
                                content=b'{"messages": [{"role": "user", "content": "hi"}]}\n')
            assert upload.status_code == 201, upload.text
            before = _audit(admin)
            assert [e["action"] for e in before[:3]] == [
                "POST /v1/files", "POST /v1/keys", "POST /v1/keys"]
            assert before[0]["target"] == upload.json()["file_id"] and before[0]["outcome"] == "ok"
            assert before[1]["target"] == mine["key_id"] and before[2]["target"] == team["key_id"]
            assert all(e["key_id"] == before[0]["key_id"] for e in before)
            assert _audit(admin, page_size=1)[0]["audit_id"] == before[0]["audit_id"]

            for route in routes:
                method = sorted(route.methods)[0]
                path = re.sub(r"\{(\w+)(:\w+)?\}", r"nope-\1", route.path)
                kwargs = {"json": {}} if method != "DELETE" else {}
                seen = {e["audit_id"] for e in _audit(admin)}
                res = admin.request(method, path, **kwargs)
                new = [e for e in _audit(admin) if e["audit_id"] not in seen]
                assert len(new) == 1, (method, route.path, res.status_code, new)
                entry = new[0]
                assert entry["action"] == f"{method} {route.path}", entry
                assert entry["status_code"] == res.status_code and entry["workspace"] == "default"
                if res.status_code >= 400:
                    assert entry["outcome"] == res.json()["error"]["code"], (entry, res.text)
                if "{" in route.path:
                    assert entry["target"].startswith("nope-"), entry

            # a refused body (413, before routing) is one record of its route too
            seen = {e["audit_id"] for e in _audit(admin)}
            big = admin.post("/v1/jobs", content=b"{" + b" " * (2 << 20) + b"}",
                             headers={"content-type": "application/json"})
            assert big.status_code == 413
            new = [e for e in _audit(admin) if e["audit_id"] not in seen]
            assert [(e["action"], e["outcome"]) for e in new] == [("POST /v1/jobs", "too_large")]
            # a call without a valid key names no workspace: not recorded
            seen = {e["audit_id"] for e in _audit(admin)}
            assert admin.post("/v1/jobs", json={},
                              headers={"Authorization": "Bearer rlt-wrong"}).status_code == 401
            assert [e for e in _audit(admin) if e["audit_id"] not in seen] == []

            everything = _audit(admin)
            text = json.dumps(everything)
            for secret in (srv.key, team["api_key"], mine["api_key"]):
                assert secret not in text

        with srv.client(team["api_key"]) as other:
            assert _audit(other) == []  # the admin's records are not team-b's
            res = other.get("/v1/audit", params={"workspace": "default"})
            assert res.status_code == 404 and res.json()["error"]["where"] == "workspace"
            assert other.delete("/v1/files/file-none").status_code == 404
            own = _audit(other)
            assert [(e["action"], e["workspace"], e["key_id"]) for e in own] == [
                ("DELETE /v1/files/{file_id}", "team-b", team["key_id"])]
        with srv.client() as admin:  # the admin reads every workspace, or one
            assert {e["workspace"] for e in _audit(admin)} == {"default", "team-b"}
            assert [e["audit_id"] for e in _audit(admin, workspace="team-b")] == [
                own[0]["audit_id"]]
        total = len(everything) + 1
    finally:
        srv.kill(signal.SIGTERM)

    again = start_server(server_home, "--allow-unisolated")  # kept across a restart
    try:
        with again.client() as admin:
            res = admin.get("/v1/audit", params={"page_size": 1})
            assert res.json()["total"] == total
    finally:
        again.kill(signal.SIGTERM)


def test_inference_calls_are_not_audited(tmp_path):
    """A chat through a deployment is a POST that changes nothing: no record (and no store write
    on the serving path); the deployment's own lifecycle calls are recorded."""
    from rltune.server.audit import audited

    paths = {r.path for r in state_changing_routes(create_app(ServerSettings(home=tmp_path)))}
    assert "/v1/deployments/{dep_id}/chat/completions" not in paths
    assert any(p.startswith("/v1/deployments") for p in paths)
    assert not audited("/v1/deployments/dep-1/chat/completions")
    assert audited("/v1/jobs/ft-1/cancel")
