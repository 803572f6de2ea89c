"""The store behind the server: SQLite directly, through a SQLAlchemy URL, and (slow tier) on a
real PostgreSQL."""

from __future__ import annotations

import pytest

from rltune.sdk.errors import ConflictError
from rltune.server.store import open_store


@pytest.fixture(params=["sqlite", "sqlalchemy",
                        pytest.param("postgresql", marks=pytest.mark.slow)])
def store(request, tmp_path):
    if request.param == "sqlalchemy":
        pytest.importorskip("sqlalchemy")
        s = open_store(f"sqlite+pysqlite:///{tmp_path / 'a.db'}")
    elif request.param == "postgresql":
        pytest.importorskip("psycopg")
        s = open_store(request.getfixturevalue("postgres").new_database())
    else:
        s = open_store(tmp_path / "s.db")
    yield s
    s.close()


def test_put_get_list_scoped_and_paged(store):
    for i in range(5):
        store.put("jobs", {"id": f"ft-{i}", "workspace": "a" if i < 4 else "b",
                           "status": "PENDING" if i % 2 else "RUNNING", "created_at": float(i),
                           "model": "tiny"})
    assert store.get("jobs", "ft-4", workspace="a") is None  # other workspace
    assert store.get("jobs", "ft-4", workspace="b")["model"] == "tiny"
    page, total = store.list("jobs", workspace="a", offset=1, limit=2, newest_first=True)
    assert total == 4 and [r["id"] for r in page] == ["ft-2", "ft-1"]
    pending, n = store.list("jobs", statuses=["PENDING"])
    assert n == 2 and {r["id"] for r in pending} == {"ft-1", "ft-3"}
    with pytest.raises(ConflictError):
        store.put("jobs", {"id": "ft-0", "workspace": "a", "status": "X", "created_at": 0.0})


def test_update_is_compare_and_set(store):
    store.put("jobs", {"id": "ft-1", "workspace": "a", "status": "RUNNING", "created_at": 1.0})
    assert store.update("jobs", "ft-1", expect_status=["PENDING"], status="CANCELED") is None
    new = store.update("jobs", "ft-1", expect_status=["RUNNING"], status="CANCELED", error="x")
    assert new["status"] == "CANCELED" and store.get("jobs", "ft-1")["error"] == "x"
    assert store.delete("jobs", "ft-1") and store.get("jobs", "ft-1") is None


def test_sqlite_store_uses_wal(tmp_path):
    s = open_store(tmp_path / "w.db")
    assert s.db.execute("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
