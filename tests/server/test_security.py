"""Auth on every route, workspace isolation, unsafe uploads, idempotency, error body."""

from __future__ import annotations

import io
import json
import re
import zipfile

import httpx

from .conftest import start_server

ROW = json.dumps({"messages": [{"role": "user", "content": "1+1"}],
                  "rollout_extra": {"answer": "2"}}) + "\n"


def _zip(entries: dict[str, str], symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in entries.items():
            zf.writestr(name, text)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (0o120777 << 16)
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


REWARD = ("from rltune.sdk import AbstractRewardProcessor\n"
          "class R(AbstractRewardProcessor):\n"
          "    def process(self, data):\n        return None\n")


def test_every_v1_route_needs_a_valid_key(server):
    spec = httpx.get(server.url + "/openapi.json").json()
    with server.client() as c:
        new = c.post("/v1/keys", json={"name": "tmp"}).json()
        assert c.delete(f"/v1/keys/{new['key_id']}").json()["revoked_at"]
    checked = 0
    for path, methods in spec["paths"].items():
        if not path.startswith("/v1"):
            continue
        url = server.url + re.sub(r"\{[^}]+\}", "x-1", path)
        for method in methods:
            for headers in ({}, {"Authorization": "Bearer nope"},
                            {"Authorization": f"Bearer {new['api_key']}"},
                            {"Authorization": "Basic abc"}):
                r = httpx.request(method.upper(), url, headers=headers, timeout=10)
                assert r.status_code == 401, (method, path, headers, r.text)
                assert r.json()["error"]["code"] == "unauthorized"
                checked += 1
    assert checked >= 4 * 20


def test_other_workspace_resources_answer_404(server):
    with server.client() as admin:
        other = admin.post("/v1/keys", json={"workspace": "team-b"}).json()
        f = admin.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW).json()
        fn = admin.post("/v1/functions", params={"classpath": "r.py:R", "type": "reward"},
                        content=_zip({"r.py": REWARD})).json()
        assert fn["entity_id"].startswith("rw-")
    with server.client(other["api_key"]) as b:
        assert b.get("/v1/whoami").json()["workspace"] == "team-b"
        for path in (f"/v1/files/{f['file_id']}", f"/v1/functions/{fn['entity_id']}"):
            r = b.get(path)
            assert r.status_code == 404, r.text
            assert r.json()["error"]["code"] == "not_found"
        assert b.get("/v1/files").json()["total"] == 0
        # a job of team-b may not reference team-a's file
        r = b.post("/v1/jobs", json={"config": {"model": "tiny", "datasets": [
            {"type": "training", "file_id": f["file_id"]}]}})
        assert r.status_code == 404 and r.json()["error"]["where"] == "datasets[0].file_id"
        # and team-b cannot create keys elsewhere
        assert b.post("/v1/keys", json={"workspace": "default"}).status_code == 401


def test_unsafe_archives_and_bad_data_are_refused_clearly(server):
    with server.client() as c:
        r = c.post("/v1/functions", params={"classpath": "r.py:R", "type": "reward"},
                   content=_zip({"r.py": REWARD, "../evil.py": "x"}))
        assert r.status_code == 400 and ".." in r.json()["error"]["message"]
        r = c.post("/v1/functions", params={"classpath": "r.py:R", "type": "reward"},
                   content=_zip({"r.py": REWARD}, symlink="link"))
        assert r.status_code == 400 and "symlink" in r.json()["error"]["message"].lower()
        r = c.post("/v1/functions", params={"classpath": "r.py:R"}, content=b"not a zip")
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_archive"
        r = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW + "{bad\n")
        body = r.json()
        assert r.status_code == 422 and body["error"]["where"] == "t.jsonl:2", body
        assert set(body) == {"error", "status"}
        r = c.post("/v1/jobs", json={"config": {"model": "tiny", "bogus": 1}})
        assert r.status_code == 422 and "bogus" in json.dumps(r.json())


def test_oversized_upload_is_413(server_home):
    srv = start_server(server_home, "--max-upload-bytes", "1000")
    try:
        with srv.client() as c:
            r = c.post("/v1/files", params={"filename": "big.jsonl"}, content=ROW * 100)
            assert r.status_code == 413, r.text
            assert "limit of 1000 bytes" in r.json()["error"]["message"] or \
                "the limit is 1000" in r.json()["error"]["message"]
            assert c.post("/v1/files", params={"filename": "ok.jsonl"},
                          content=ROW).status_code == 201
    finally:
        srv.kill()


def test_idempotent_create_replays_and_rejects_reuse(server):
    with server.client() as c:
        h = {"Idempotency-Key": "k1"}
        a = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW, headers=h)
        b = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW, headers=h)
        assert a.status_code == b.status_code == 201
        assert a.json()["file_id"] == b.json()["file_id"]
        assert b.headers.get("idempotent-replayed") == "true"
        assert c.get("/v1/files").json()["total"] == 1
        r = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW * 2, headers=h)
        assert r.status_code == 409


def test_admin_key_file_is_private(server):
    mode = (server.home / "server" / "admin.key").stat().st_mode & 0o777
    assert mode == 0o600
