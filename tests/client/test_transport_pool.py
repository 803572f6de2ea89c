"""The SDK's REST transport: one pooled HTTP client (calls reuse the kept-alive connection),
and a model export that streams to disk (memory does not grow with the model)."""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import tarfile
import threading
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from rltune.client import AgenticRL
from rltune.engine.placement import auto_placement

MODEL_BYTES = 32 << 20  # incompressible: the archive is as large as the model


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    peers: ClassVar[list[int]] = []
    archive: Path

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        type(self).peers.append(self.client_address[1])
        if self.path.startswith("/v1/models/big/export"):
            size = self.archive.stat().st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with self.archive.open("rb") as fh:
                shutil.copyfileobj(fh, self.wfile, 64 << 10)
            return
        body = json.dumps({"name": self.path.rsplit("/", 1)[-1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    weights = root / "model.safetensors"
    with weights.open("wb") as fh:
        for _ in range(MODEL_BYTES >> 20):
            fh.write(os.urandom(1 << 20))
    archive = root / "big.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(weights, arcname="big/model.safetensors")
        config = b'{"model_type": "qwen2"}'
        info = tarfile.TarInfo("big/config.json")
        info.size = len(config)
        tar.addfile(info, io.BytesIO(config))
    _Handler.archive = archive
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", weights
    httpd.shutdown()
    httpd.server_close()


def test_two_calls_reuse_one_connection(server):
    url, _ = server
    client = AgenticRL(api_key="sk-test", base_url=url)
    _Handler.peers.clear()
    assert client.get_model("a") == {"name": "a"}
    assert client.get_model("b") == {"name": "b"}
    assert client.http is client.http  # one transport, one httpx.Client
    assert len(_Handler.peers) == 2 and len(set(_Handler.peers)) == 1, _Handler.peers


def test_export_streams_to_disk_without_holding_the_archive(server, tmp_path):
    url, weights = server
    client = AgenticRL(api_key="sk-test", base_url=url)
    seen: list[tuple[int, int | None]] = []
    tracemalloc.start()
    try:
        out = client.export_model("big", tmp_path / "export",
                                  progress=lambda done, total: seen.append((done, total)))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (out / "config.json").read_bytes() == b'{"model_type": "qwen2"}'
    assert (out / "model.safetensors").stat().st_size == MODEL_BYTES
    with (out / "model.safetensors").open("rb") as a, weights.open("rb") as b:
        assert a.read(1 << 20) == b.read(1 << 20)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    # the archive came in chunks (a progress call each) and never whole into memory
    total = seen[-1][1]
    assert total is not None and total > MODEL_BYTES and seen[-1][0] == total
    assert len(seen) >= 8 and all(a[0] < b[0] for a, b in itertools.pairwise(seen))
    # (a fixed ~5 MiB: the HTTP client, the chunks; the whole archive would be > 32 MiB)
    assert peak < MODEL_BYTES // 3, f"peak {peak / 2**20:.1f} MiB, model {MODEL_BYTES >> 20} MiB"


def test_serving_defaults_to_auto_placement():
    import torch

    if torch.cuda.is_available():
        assert auto_placement() == ("cuda", "bfloat16" if torch.cuda.is_bf16_supported()
                                    else "float16")
    else:
        assert auto_placement() == ("cpu", "float32")
    assert auto_placement("cpu", "bf16") == ("cpu", "bf16")  # given values are kept
