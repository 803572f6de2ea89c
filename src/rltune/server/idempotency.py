"""Idempotent creates: a client-supplied ``Idempotency-Key`` replays the first answer.

The key is reserved before the work starts (a second request with the same key while the first
runs gets 409), the answer is stored after; a failed create frees the key again. ``redact``
shapes what is stored for a replay, so a secret shown once (a new API key) never reaches the
store.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from fastapi.responses import JSONResponse

from rltune.sdk.errors import ConflictError
from rltune.server.store import Store

Create = Callable[[], Awaitable[tuple[int, Any]]]


def fingerprint(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True,
                                                                  default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


async def idempotent(store: Store, workspace: str, key: Optional[str], print_: str,
                     create: Create,
                     redact: Optional[Callable[[Any], Any]] = None,
                     created: Optional[tuple[str, str]] = None) -> JSONResponse:
    """Run ``create`` once per (workspace, key); replay its (status, body) afterwards.

    ``created`` is (table, field of the answer holding the new record's id): a replay after
    that record was deleted answers 409 instead of handing out a dead id."""
    if not key:
        status, body = await create()
        return JSONResponse(body, status_code=status)
    rid = f"{workspace}:{key}"
    try:
        store.put("idempotency", {"id": rid, "workspace": workspace, "status": "pending",
                                  "created_at": time.time(), "fingerprint": print_})
    except ConflictError:
        rec = store.get("idempotency", rid) or {}
        if rec.get("fingerprint") != print_:
            raise ConflictError(
                "Idempotency-Key was already used for a different request",
                where="Idempotency-Key header", hint="use a new key for a new request") from None
        if rec.get("status") != "done":
            raise ConflictError("a request with this Idempotency-Key is still running",
                                where="Idempotency-Key header",
                                hint="retry when it has finished") from None
        _check_alive(store, workspace, created, rec.get("body"))
        return JSONResponse(rec["body"], status_code=rec["status_code"],
                            headers={"Idempotent-Replayed": "true"})
    try:
        status, body = await create()
    except BaseException:
        store.delete("idempotency", rid)
        raise
    store.update("idempotency", rid, status="done", status_code=status,
                 body=redact(body) if redact else body)
    return JSONResponse(body, status_code=status)


def _check_alive(store: Store, workspace: str, created: Optional[tuple[str, str]],
                 body: Any) -> None:
    if created is None or not isinstance(body, dict) or not body.get(created[1]):
        return
    rid = body[created[1]]
    if store.get(created[0], rid, workspace=workspace) is None:
        raise ConflictError(
            f"the request with this Idempotency-Key created {rid}, which was deleted since",
            where="Idempotency-Key header", hint="send the request again with a new key")
