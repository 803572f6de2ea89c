"""``download_url`` datasets: fetched over HTTP from a local server, stored as files at submit;
errors name the dataset and say what failed."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from rltune.config import load_job_config_text
from rltune.config.download import download_to_files
from rltune.sdk.errors import DatasetError

ROW = {"messages": [{"role": "user", "content": "1+1?"}], "rollout_extra": {"solution": "2"}}


@pytest.fixture
def http_data():
    """A plain HTTP server: /train.jsonl (4 rows), /bad.jsonl (line 2 broken), 404 otherwise."""
    files = {"/train.jsonl": (json.dumps(ROW) + "\n") * 4,
             "/bad.jsonl": json.dumps(ROW) + "\n{\"messages\": []}\n"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path.split("?")[0])
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write((body or "not found").encode())

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def job_yaml(url: str) -> str:
    return (f"name: dl\nmodel: stand-in\ndatasets:\n  - type: training\n"
            f"    data_source_type: download_url\n    download_url: {url}\n"
            "training: {hyper_parameters: {batch_size: 2, n_rollouts: 2}}\n")


@pytest.fixture
def server(server_home, monkeypatch):
    """A server that may fetch from loopback (the test's HTTP server): by default it refuses
    non-public addresses (tests/security/test_download_guard.py)."""
    from server.conftest import start_server  # tests/server/conftest.py

    monkeypatch.setenv("RLTUNE_URL_ALLOW_NETWORKS", "127.0.0.0/8")
    srv = start_server(server_home)
    yield srv
    srv.kill()


def test_server_fetches_and_stores_the_dataset(server, http_data):
    model = server.home / "models" / "stand-in"  # weightless: the job fails once started
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    with server.client() as c:
        res = c.post("/v1/jobs", json={"config_yaml": job_yaml(f"{http_data}/train.jsonl?x=1")})
        assert res.status_code == 201, res.text
        (file_id,) = res.json()["training_file_ids"]
        f = c.get(f"/v1/files/{file_id}").json()
        assert (f["filename"], f["rows"]) == ("train.jsonl", 4)
        for path, code, text in (("/missing.jsonl", 422, "HTTP 404"),
                                 ("/bad.jsonl", 422, "bad.jsonl:2")):
            res = c.post("/v1/jobs", json={"config_yaml": job_yaml(http_data + path)})
            err = res.json()["error"]
            assert res.status_code == code and text in err["message"] + str(err["where"]), err
        res = c.post("/v1/jobs", json={"config_yaml": job_yaml("ftp://host/x.jsonl")})
        assert "not an http(s) URL" in res.json()["error"]["message"]
        assert res.json()["error"]["where"] == "datasets[0].download_url"


def test_local_training_downloads_into_the_job_dir(tmp_path, http_data):
    job = load_job_config_text(job_yaml(f"{http_data}/train.jsonl"))
    fixed = download_to_files(job, tmp_path / "data")
    path = fixed.datasets[0].file_name
    assert fixed.datasets[0].data_source_type.value == "file_id"
    assert Path(path).read_text().count("\n") == 4
    with pytest.raises(DatasetError, match="failed: ConnectError"):
        download_to_files(load_job_config_text(job_yaml("http://127.0.0.1:9/x.jsonl")), tmp_path)


@pytest.fixture
def trickle():
    """An HTTP server that sends a valid row's bytes one every 0.2 s, for ever (until shut)."""
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            try:
                while not stop.wait(0.2):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:
                pass

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/slow.jsonl"
    stop.set()
    srv.shutdown()


def test_a_trickling_download_stops_at_the_minimum_rate_and_the_deadline(trickle):
    """Issue 37 item 4: one byte every 0.2 s never passes the per-read timeout."""
    import time

    from rltune.config.download import fetch

    started = time.monotonic()
    with pytest.raises(DatasetError, match="slower than 1000 bytes/s") as err:
        fetch(trickle, where="datasets[0].download_url", min_rate=1000, rate_grace=1.0)
    assert time.monotonic() - started < 5 and err.value.where == "datasets[0].download_url"
    started = time.monotonic()
    with pytest.raises(DatasetError, match=r"took longer than 1\.5 s"):
        fetch(trickle, where="d", deadline=1.5, min_rate=1, rate_grace=0.5)
    assert time.monotonic() - started < 5


def test_slow_downloads_leave_other_submits_their_threads(server, trickle):
    """Issue 37 item 4: more trickling downloads than the default thread pool has threads;
    a submit that needs none still answers at once."""
    import concurrent.futures
    import os
    import time

    n = min(32, (os.cpu_count() or 1) + 4) + 2  # asyncio's default pool size, and more
    with server.client() as c, concurrent.futures.ThreadPoolExecutor(n) as pool:
        slow = [pool.submit(c.post, "/v1/jobs", json={"config_yaml": job_yaml(trickle)})
                for _ in range(n)]
        time.sleep(1.5)  # every slow submit is downloading
        assert not any(f.done() for f in slow)
        started = time.monotonic()
        res = c.post("/v1/jobs", json={"config_yaml": "model: [unclosed"})
        assert res.status_code == 422 and time.monotonic() - started < 3, res.text
        server.kill()  # the trickles would go on until the rate check (10 s)
        concurrent.futures.wait(slow, timeout=30)
