"""Issue 37 item 3: ``download_url: s3://`` on the job server reads only buckets its operator
gave the caller's workspace (``--s3-workspace-buckets``); no request signed with the server's
keys goes out for any other bucket. A moto server on loopback stands in for the store, behind
a recording proxy that sees every request and its ``Authorization`` header."""

from __future__ import annotations

import http.server
import json
import threading

import httpx
import pytest

from .test_download_url import job_yaml

ROW = {"messages": [{"role": "user", "content": "1+1?"}], "rollout_extra": {"solution": "2"}}


@pytest.fixture
def s3_store(monkeypatch):
    """(endpoint, requests seen): buckets ``granted`` and ``victim`` each hold train.jsonl."""
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    import boto3

    moto = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    host, port = moto.get_host_and_port()
    upstream = f"http://{host}:{port}"
    seen: list[tuple[str, str, bool]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def _forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.command, self.path, "Authorization" in self.headers))
            resp = httpx.request(self.command, upstream + self.path, content=body,
                                 headers={k: v for k, v in self.headers.items()
                                          if k.lower() != "host"})
            self.send_response(resp.status_code)
            for k, v in resp.headers.items():
                if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                     "content-encoding"):
                    self.send_header(k, v)
            length = resp.headers.get("content-length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(resp.content)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(resp.content)

        do_GET = do_HEAD = do_PUT = do_POST = _forward

        def log_message(self, *args):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
    for key, value in {"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    s3 = boto3.client("s3", endpoint_url=upstream)
    for bucket in ("granted", "victim"):
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key="team/train.jsonl",
                      Body=((json.dumps(ROW) + "\n") * 3).encode())
    yield endpoint, seen
    proxy.shutdown()
    moto.stop()


def test_the_server_signs_no_request_for_a_bucket_the_workspace_was_not_given(
        server_home, s3_store, monkeypatch):
    from server.conftest import start_server  # tests/server/conftest.py

    seen = s3_store[1]
    monkeypatch.setenv("RLTUNE_URL_ALLOW_NETWORKS", "127.0.0.1/32")  # the store's endpoint
    model = server_home / "models" / "stand-in"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    srv = start_server(server_home, "--s3-workspace-buckets", "tenant=granted/team/")
    try:
        with srv.client() as admin:
            key = admin.post("/v1/keys", json={"workspace": "tenant"}).json()["api_key"]
        with srv.client(key) as c:
            for url in ("s3://victim/team/train.jsonl", "s3://granted/other/train.jsonl",
                        "s3://granted/team/../other/train.jsonl"):
                res = c.post("/v1/jobs", json={"config_yaml": job_yaml(url)})
                err = res.json()["error"]
                assert res.status_code == 422, res.text
                assert err["where"] == "datasets[0].download_url", err
                assert "RLTUNE_S3_WORKSPACE_BUCKETS" in err["hint"], err
            assert seen == []  # refused before any request
            res = c.post("/v1/jobs", json={"config_yaml": job_yaml(
                "s3://granted/team/train.jsonl")})
            assert res.status_code == 201, res.text
        with srv.client() as admin:  # the default workspace was given nothing
            res = admin.post("/v1/jobs", json={"config_yaml": job_yaml(
                "s3://granted/team/train.jsonl")})
            assert res.status_code == 422 and "'default'" in res.json()["error"]["message"]
    finally:
        srv.kill()
    assert seen and all(path.startswith("/granted/team/") for _, path, _ in seen), seen
    assert all(signed for *_, signed in seen)  # the one granted read was signed


def test_the_store_endpoint_must_be_an_allowed_address(server_home, s3_store):
    from server.conftest import start_server

    srv = start_server(server_home, "--s3-workspace-buckets", "default=granted")
    try:
        with srv.client() as c:
            res = c.post("/v1/jobs", json={"config_yaml": job_yaml(
                "s3://granted/team/train.jsonl")})
        assert res.status_code == 422 and "loopback" in res.json()["error"]["message"], res.text
    finally:
        srv.kill()
    assert s3_store[1] == []


def test_a_bad_grant_stops_the_server_at_start(server_home):
    from server.conftest import start_server

    with pytest.raises(AssertionError, match="not a workspace=bucket"):
        start_server(server_home, "--s3-workspace-buckets", "tenant")
