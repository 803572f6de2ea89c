"""The job server's durable store: one interface, SQLite (WAL) by default, any SQLAlchemy URL.

Example:
    >>> from rltune.server.store import open_store
    >>> store = open_store("sqlite:///:memory:")
    >>> store.put("jobs", {"id": "ft-1", "workspace": "w", "status": "PENDING", "created_at": 1.0})
    >>> store.get("jobs", "ft-1", workspace="w")["status"]
    'PENDING'
"""

from rltune.server.store.base import TABLES, Store, open_store

__all__ = ["TABLES", "Store", "open_store"]
