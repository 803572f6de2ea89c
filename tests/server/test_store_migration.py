"""A database of an older schema: the first server release had seven tables (no ``models``,
``deployments``, ``evaluations``). A server started on it adds the missing tables and keeps
every record. Runs on SQLite, and on PostgreSQL in the slow tier (``db_url``)."""

from __future__ import annotations

import os
import signal
import sqlite3

from rltune.server.store.base import alchemy_url

from .conftest import start_server

ROW = b'{"messages": [{"role": "user", "content": "2+3?"}], "answer": "5"}\n'
NEWER = ("models", "deployments", "evaluations")


def _sql(url: str, statement: str) -> list[tuple]:
    """Run one statement on the database itself (not through ``Store``, which adds tables)."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
        try:
            return conn.execute(statement).fetchall()
        finally:
            conn.close()
    import sqlalchemy

    engine = sqlalchemy.create_engine(alchemy_url(url))
    try:
        with engine.begin() as conn:
            res = conn.execute(sqlalchemy.text(statement))
            return [tuple(r) for r in res] if res.returns_rows else []
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    if url.startswith("sqlite"):
        return {r[0] for r in _sql(url, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {r[0] for r in _sql(url, "SELECT tablename FROM pg_tables "
                                    "WHERE schemaname = 'public'")}


def test_a_database_of_the_older_schema_is_migrated(server_home):
    url = os.environ.get("RLTUNE_DB_URL") or f"sqlite:///{server_home / 'server' / 'rltune.db'}"
    srv = start_server(server_home)
    with srv.client() as c:
        fid = c.post("/v1/files", params={"filename": "a.jsonl"}, content=ROW).json()["file_id"]
    key = srv.key
    srv.kill(signal.SIGTERM)
    for table in NEWER:  # back to the first release's schema
        _sql(url, f"DROP TABLE {table}")
    assert not _tables(url) & set(NEWER)
    srv = start_server(server_home)
    try:
        assert set(NEWER) <= _tables(url)
        assert srv.key == key
        with srv.client() as c:
            assert c.get(f"/v1/files/{fid}").json()["filename"] == "a.jsonl"
            for path in ("/v1/models", "/v1/deployments", "/v1/evaluations"):
                r = c.get(path)
                assert r.status_code == 200 and r.json()["total"] == 0, (path, r.text)
    finally:
        srv.kill(signal.SIGTERM)
