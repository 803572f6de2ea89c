"""The job server on a real PostgreSQL (slow tier; tests/server/postgres.py starts it): concurrent
submits and idempotent creates under a race. Every other server test (restart recovery in
test_lifecycle.py and test_instances.py, the older-schema migration in test_store_migration.py,
schemathesis) also runs on PostgreSQL in the slow tier, through the ``db_url`` fixture."""

from __future__ import annotations

import asyncio
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rltune.client import AgenticRL

from .conftest import make_workspace, start_server

pytestmark = pytest.mark.slow

ROW = b'{"messages": [{"role": "user", "content": "2+3?"}], "answer": "5"}\n'


@pytest.fixture
def pg_home(tmp_path, monkeypatch, postgres):
    """A server home whose store is a fresh database on the test PostgreSQL."""
    pytest.importorskip("psycopg")
    home = tmp_path / "home"
    home.mkdir()
    url = postgres.new_database()
    monkeypatch.setenv("RLTUNE_HOME", str(home))
    monkeypatch.setenv("RLTUNE_DB_URL", url)
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    monkeypatch.delenv("RLTUNE_BASE_URL", raising=False)
    return home, url


def test_the_store_is_postgresql(pg_home):
    from rltune.server.store import open_store

    home, url = pg_home
    srv = start_server(home)
    try:
        with srv.client() as c:
            fid = c.post("/v1/files", params={"filename": "a.jsonl"}, content=ROW).json()
        store = open_store(url)
        try:
            assert store.db.engine.dialect.name == "postgresql"
            assert store.get("files", fid["file_id"])["filename"] == "a.jsonl"
        finally:
            store.close()
        assert not (home / "server" / "rltune.db").exists()  # no SQLite beside it
    finally:
        srv.kill(signal.SIGTERM)


def test_concurrent_submits_and_racing_idempotency_keys(pg_home, tmp_path, tiny_model_dir):
    home, _ = pg_home
    srv = start_server(home)
    try:
        ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=50)
        client = AgenticRL(api_key=srv.key, base_url=srv.url).init(ws / "job.yaml")
        asyncio.run(client.register_functions())
        asyncio.run(client.upload_datasets())
        body = {"config": client._job_config()}

        def submit(key: str | None):
            with srv.client() as c:
                headers = {"Idempotency-Key": key} if key else {}
                r = c.post("/v1/jobs", json=body, headers=headers)
                return r.status_code, r.json()

        keys = [None] * 8 + ["same"] * 6
        with ThreadPoolExecutor(len(keys)) as pool:
            answers = list(pool.map(submit, keys))
        fresh = [a for k, a in zip(keys, answers, strict=True) if k is None]
        assert all(code == 201 for code, _ in fresh), fresh
        ids = {a["job_id"] for _, a in fresh}
        assert len(ids) == 8
        same = [a for k, a in zip(keys, answers, strict=True) if k == "same"]
        created = {a["job_id"] for code, a in same if code == 201}
        assert len(created) == 1, same  # one job for the key, whoever won the race
        assert all(code in (201, 409) for code, _ in same), same
        assert submit("same")[1]["job_id"] in created  # a replay once the first is done
        with srv.client() as c:
            listed = c.get("/v1/jobs", params={"page_size": 100}).json()
            assert listed["total"] == 9
            assert {j["job_id"] for j in listed["items"]} == ids | created
            # one slot: at most one RUNNING, the rest wait PENDING
            statuses = [j["status"] for j in listed["items"]]
            assert statuses.count("RUNNING") <= 1
            for job_id in ids | created:
                r = c.post(f"/v1/jobs/{job_id}/cancel")
                assert r.status_code in (200, 409), r.text
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                jobs = c.get("/v1/jobs", params={"page_size": 100}).json()["items"]
                if all(j["status"] not in ("PENDING", "RUNNING") for j in jobs):
                    break
                time.sleep(0.2)
            assert all(j["status"] not in ("PENDING", "RUNNING") for j in jobs), jobs
    finally:
        srv.kill(signal.SIGTERM)
