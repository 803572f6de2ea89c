"""A real job server per test (the same launcher as tests/server) and a few upload helpers."""

from __future__ import annotations

import io
import signal
import zipfile

import pytest

from server.conftest import Server, start_server  # tests/server/conftest.py

__all__ = ["Server", "run_function", "start_server", "zip_bytes"]


def zip_bytes(entries: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in entries.items():
            zf.writestr(name, text)
    return buf.getvalue()


def run_function(client, files: dict[str, str], classpath: str, env: dict,
                 **runtime) -> dict:
    """Register ``files`` as a reward function, load it with ``runtime.env`` = ``env`` (and
    the other ``runtime`` fields), call it once; its reward's ``found`` field."""
    fn = client.post("/v1/functions", params={"classpath": classpath, "type": "reward"},
                     content=zip_bytes(files))
    assert fn.status_code == 201, fn.text
    inst = client.post(f"/v1/functions/{fn.json()['entity_id']}/load",
                       json={"runtime": {"env": env, **runtime}})
    assert inst.status_code == 201, inst.text
    r = client.post(f"/v1/instances/{inst.json()['instance_id']}/test",
                    json={"input": {"agent_output": {"messages": []}}})
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert out["status"] == "success", out
    return out["reward"]["found"]


@pytest.fixture
def server_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("RLTUNE_HOME", str(home))
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    monkeypatch.delenv("RLTUNE_BASE_URL", raising=False)
    return home


@pytest.fixture(scope="package")
def server(tmp_path_factory):
    """One server for the package's tests (each test uses its own keys and resources)."""
    home = tmp_path_factory.mktemp("security") / "home"
    home.mkdir()
    srv = start_server(home)
    yield srv
    srv.kill(signal.SIGTERM)
