"""A real job server on 127.0.0.1 (ephemeral port) in its own process, per test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rltune.templates import create_workspace


def _start_postgres():
    """tests/server/postgres.py's cluster, imported by path: other folders' conftests load
    this file by path too, where a relative import has no package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rltune_test_postgres",
                                                  Path(__file__).with_name("postgres.py"))
    mod = sys.modules.get(spec.name)
    if mod is None:
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # its dataclass looks its module up there
        spec.loader.exec_module(mod)
    return mod.start_postgres()


@dataclass
class Server:
    url: str
    key: str
    home: Path
    proc: subprocess.Popen
    _spec: Any = None

    def client(self, key: str | None = None) -> httpx.Client:
        """A client whose every JSON answer is checked against the server's OpenAPI document
        (status code and body schema, with schemathesis): the typed success bodies of
        ``rltune.server.schemas`` and the error body are what the routes really return."""
        return httpx.Client(base_url=self.url, timeout=60,
                            headers={"Authorization": f"Bearer {key or self.key}"},
                            event_hooks={"response": [self.conforms]})

    def conforms(self, response: httpx.Response) -> None:
        if "json" not in response.headers.get("content-type", ""):
            return  # streams (event-stream), file downloads, the console's pages
        path = response.request.url.path
        if not (path.startswith("/v1/") or path == "/health"):
            return
        if self._spec is None:
            try:
                import schemathesis
            except ImportError:
                return
            self._spec = schemathesis.openapi.from_url(self.url + "/openapi.json")
        found = self._spec.find_operation_by_path(response.request.method, path)
        if found is None:
            return  # the cloud SDK's aliases (/v1/fine-tunes…) are not in the document
        try:
            _ = response.request.content
        except httpx.RequestNotRead:
            return  # a streamed (chunked) upload: schemathesis would read the request body
        response.read()
        try:
            found.validate_response(response)
        except Exception as exc:
            raise AssertionError(f"{response.request.method} {path} -> {response.status_code} "
                                 f"does not match the OpenAPI document: {exc}\n"
                                 f"{response.text[:2000]}") from None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)


def start_server(home: Path, *args: str) -> Server:
    env = {**os.environ, "RLTUNE_HOME": str(home), "RLTUNE_TORCH_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    info_path = home / "server" / "server.json"
    info_path.unlink(missing_ok=True)
    log = open(home / "server.log", "ab")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen([sys.executable, "-m", "rltune.server", "--port", "0", *args],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    return wait_for_server(proc, home, home / "server.log")


def wait_for_server(proc: subprocess.Popen, home: Path, log: Path, *,
                    same_pid: bool = True) -> Server:
    """The server ``proc`` started in ``home`` once it answers ``/health`` (``same_pid``: the
    ``server.json`` is that process's own, not one a wrapper such as ``runuser`` started)."""
    info_path = home / "server" / "server.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        if info_path.exists():
            info = json.loads(info_path.read_text())
            if not same_pid or info["pid"] == proc.pid:
                try:
                    if httpx.get(info["url"] + "/health", timeout=2).status_code == 200:
                        key = (home / "server" / "admin.key").read_text().strip()
                        return Server(info["url"], key, home, proc)
                except httpx.HTTPError:
                    pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not start: " + log.read_text())


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL on loopback for this session (started on first use, always stopped)."""
    try:
        cluster = _start_postgres()
    except FileNotFoundError as exc:
        pytest.skip(f"{exc}: install PostgreSQL (Debian: postgresql) for the store tests")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def db_url(request) -> str | None:
    """The server's store: the embedded SQLite default, and (slow tier) a fresh database on a
    real PostgreSQL, so every server test runs on both."""
    if request.param == "sqlite":
        return None
    pytest.importorskip("psycopg")
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def server_home(tmp_path, monkeypatch, db_url) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("RLTUNE_HOME", str(home))
    if db_url:
        monkeypatch.setenv("RLTUNE_DB_URL", db_url)
    else:
        monkeypatch.delenv("RLTUNE_DB_URL", raising=False)
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    monkeypatch.delenv("RLTUNE_BASE_URL", raising=False)
    return home


@pytest.fixture
def server(server_home):
    srv = start_server(server_home)
    yield srv
    srv.kill(signal.SIGTERM)


def make_workspace(root: Path, model_dir: Path, **hp) -> Path:
    """The calc template on the tiny model: a short job (seconds per step)."""
    ws = root / "ws"
    create_workspace(ws, train_rows=8, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    job["training"]["hyper_parameters"].update({
        "batch_size": 2, "n_rollouts": 2, "ppo_mini_batch_size": None,
        "max_length": 200, "max_prompt_length": 180,
        "eval_steps": 2, "save_strategy": "steps", "save_steps": 1, "save_total_limit": 2,
        "learning_rate": 1e-3, "n_epochs": 1, **hp})
    for fn in job["functions"]:
        fn["runtime"] = {"concurrency": 8, "capacity": 1, "min_capacity": 1, "max_capacity": 1}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws
