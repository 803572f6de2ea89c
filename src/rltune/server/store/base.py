"""``Store``: records (JSON dicts) in a few tables, each row = indexed columns + a JSON body.

Every table has ``id``, ``workspace``, ``status``, ``created_at`` and ``data``; the first four
are real columns (filters, paging, atomic state changes), the rest of the record lives in
``data``. Two adapters speak the same ``:name`` SQL: ``sqlite3`` (default, WAL mode, no extra
dependency) and SQLAlchemy (for ``postgresql://`` URLs; imported only when used).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.errors import ConfigError, ConflictError

#: Tables of the store. ``keys`` rows use the key's sha256 as ``status``-free lookup column.
TABLES = ("workspaces", "keys", "files", "functions", "instances", "jobs", "idempotency",
          "models", "deployments", "evaluations", "audit")
_COLUMNS = ("id", "workspace", "status", "created_at")


class _SqliteDB:
    def __init__(self, path: str):
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        # WAL: readers (CLI, console) never block the writer (the executor).
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.lock = threading.RLock()
        self.float_type = "REAL"

    def execute(self, sql: str, params: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
        with self.lock:
            cur = self.conn.execute(sql, params or {})
            rows = [dict(r) for r in cur.fetchall()] if cur.description else []
            self.rowcount = cur.rowcount
            return rows

    def close(self) -> None:
        self.conn.close()


class _AlchemyDB:
    def __init__(self, url: str):
        try:
            import sqlalchemy
            if url.startswith("postgresql+psycopg:"):
                import psycopg  # noqa: F401 - the driver, checked here for a clear error
        except ImportError:
            raise ConfigError(
                f"store URL {url.split('@')[-1]!r} needs SQLAlchemy and its driver",
                where="--db",
                hint="pip install 'rltune[postgres]', or use the default SQLite store",
            ) from None
        self.sa = sqlalchemy
        self.engine = sqlalchemy.create_engine(url, pool_pre_ping=True)
        self.lock = threading.RLock()
        self.float_type = "REAL" if url.startswith("sqlite") else "DOUBLE PRECISION"

    def execute(self, sql: str, params: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
        with self.lock, self.engine.begin() as conn:
            res = conn.execute(self.sa.text(sql), params or {})
            self.rowcount = res.rowcount
            return [dict(r._mapping) for r in res] if res.returns_rows else []

    def close(self) -> None:
        self.engine.dispose()


class Store:
    """Tables of JSON records with workspace scoping and compare-and-set status changes."""

    def __init__(self, db: Any):
        self.db = db
        for table in TABLES:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (id TEXT PRIMARY KEY, workspace TEXT, "
                f"status TEXT, created_at {db.float_type}, data TEXT NOT NULL)"
            )
            db.execute(f"CREATE INDEX IF NOT EXISTS ix_{table}_ws ON {table} (workspace, status)")

    # ---- rows <-> records
    @staticmethod
    def _row(row: dict[str, Any]) -> dict[str, Any]:
        rec = json.loads(row["data"])
        rec.update({k: row[k] for k in _COLUMNS})
        return rec

    @staticmethod
    def _params(rec: dict[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in rec.items() if k not in _COLUMNS}
        return {**{k: rec.get(k) for k in _COLUMNS}, "data": json.dumps(body, default=str)}

    # ---- generic record operations
    def put(self, table: str, rec: dict[str, Any]) -> None:
        """Insert a record (``id`` must be new: a duplicate raises ``ConflictError``)."""
        try:
            self.db.execute(
                f"INSERT INTO {table} (id, workspace, status, created_at, data) "
                "VALUES (:id, :workspace, :status, :created_at, :data)", self._params(rec))
        except Exception as exc:  # sqlite3.IntegrityError / sqlalchemy IntegrityError
            if "unique" in str(exc).lower() or "integrity" in type(exc).__name__.lower():
                raise ConflictError(f"{table} record {rec['id']!r} exists") from None
            raise

    def get(self, table: str, rid: str, *, workspace: Optional[str] = None) -> Optional[dict]:
        """The record, or None (also when it belongs to another ``workspace``)."""
        rows = self.db.execute(f"SELECT * FROM {table} WHERE id = :id", {"id": rid})
        if not rows or (workspace is not None and rows[0]["workspace"] != workspace):
            return None
        return self._row(rows[0])

    def list(self, table: str, *, workspace: Optional[str] = None,
             statuses: Optional[Iterable[str]] = None, offset: int = 0,
             limit: Optional[int] = None, newest_first: bool = False) -> tuple[list[dict], int]:
        """(records of one page, total matching). ``workspace=None`` means all workspaces."""
        where, params = ["1=1"], {}
        if workspace is not None:
            where.append("workspace = :ws")
            params["ws"] = workspace
        if statuses is not None:
            names = []
            for i, s in enumerate(statuses):
                params[f"s{i}"] = s
                names.append(f":s{i}")
            where.append(f"status IN ({', '.join(names) or 'NULL'})")
        cond = " AND ".join(where)
        total = self.db.execute(f"SELECT COUNT(*) AS n FROM {table} WHERE {cond}", params)[0]["n"]
        order = "DESC" if newest_first else "ASC"
        sql = f"SELECT * FROM {table} WHERE {cond} ORDER BY created_at {order}, id {order}"
        if limit is not None:
            sql += " LIMIT :limit OFFSET :offset"
            params.update(limit=int(limit), offset=int(offset))
        return [self._row(r) for r in self.db.execute(sql, params)], int(total)

    def update(self, table: str, rid: str, *, expect_status: Optional[Iterable[str]] = None,
               **fields: Any) -> Optional[dict]:
        """Change fields of a record atomically; with ``expect_status`` only if its status is
        one of them (compare-and-set). Returns the new record, or None if nothing matched."""
        with self.db.lock:
            rec = self.get(table, rid)
            if rec is None:
                return None
            expected = list(expect_status) if expect_status is not None else None
            if expected is not None and rec["status"] not in expected:
                return None
            old_status = rec["status"]
            rec.update(fields)
            params = {**self._params(rec), "old": old_status}
            self.db.execute(
                f"UPDATE {table} SET status = :status, data = :data "
                "WHERE id = :id AND status IS NOT DISTINCT FROM :old"
                if not isinstance(self.db, _SqliteDB) else
                f"UPDATE {table} SET status = :status, data = :data "
                "WHERE id = :id AND status IS :old", params)
            return rec if self.db.rowcount == 1 else None

    def delete(self, table: str, rid: str) -> bool:
        self.db.execute(f"DELETE FROM {table} WHERE id = :id", {"id": rid})
        return self.db.rowcount == 1

    def close(self) -> None:
        self.db.close()


def alchemy_url(url: str) -> str:
    """``postgresql://`` / ``postgres://`` name the psycopg 3 driver (the ``postgres`` extra);
    SQLAlchemy would otherwise look for psycopg2. A URL naming its driver is kept.

    >>> alchemy_url("postgres://u@db:5432/rltune")
    'postgresql+psycopg://u@db:5432/rltune'
    >>> alchemy_url("postgresql+psycopg2://u@db/rltune")
    'postgresql+psycopg2://u@db/rltune'
    """
    scheme, sep, rest = url.partition("://")
    return f"postgresql+psycopg://{rest}" if sep and scheme in ("postgresql", "postgres") else url


def open_store(url: str | Path) -> Store:
    """A store from ``sqlite:///path.db`` / a plain path (SQLite) or a SQLAlchemy URL."""
    text = str(url)
    if text.startswith("sqlite:///") and "+" not in text.split(":")[0]:
        return Store(_SqliteDB(text[len("sqlite:///"):] or ":memory:"))
    if "://" not in text:
        return Store(_SqliteDB(text))
    return Store(_AlchemyDB(alchemy_url(text)))
