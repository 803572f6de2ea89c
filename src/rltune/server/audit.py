"""The audit log: one record per state-changing REST call (``POST``/``PUT``/``PATCH``/``DELETE``
under ``/v1``), written by one ASGI middleware, read with ``GET /v1/audit``.

A record says when, which workspace and key, the action (the method and the route's path
template, e.g. ``POST /v1/jobs/{job_id}/cancel``), the target (the route's path parameters,
else the id the answer names, e.g. a new job's), the HTTP status and the outcome (``ok`` or
the error code). It never holds a request body, a query string, a header or a secret: a new
key's record names its ``key_id``, never ``api_key``. Records live in the store's ``audit``
table (SQLite by default), so they survive restarts. Calls refused for a missing or unknown
key name no workspace and are not recorded; a call refused later (413, 404, 409, a 500) is.

Example:
    >>> from rltune.server.store import open_store
    >>> store = open_store("sqlite:///:memory:")
    >>> rec = record(store, workspace="w", key_id="key-1", action="POST /v1/jobs",
    ...              target="ft-1", status_code=201, outcome="ok", started=1.0, seconds=0.1)
    >>> page_of(store, "w", 0, 10)[0][0]["action"], page_of(store, "other", 0, 10)[1]
    ('POST /v1/jobs', 0)
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any, Optional

from rltune.server.store import Store

log = logging.getLogger("rltune.server.audit")
#: The methods whose calls are recorded.
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: POSTs that change nothing: a model answering a chat (one record per inference call would put
#: a store write on the serving path and bury the changes an auditor looks for).
INFERENCE_SUFFIXES = ("/chat/completions", "/completions", "/responses")
TABLE = "audit"
#: Fields of a JSON answer that name what a call created, in order of preference.
ID_FIELDS = ("job_id", "file_id", "instance_id", "entity_id", "key_id", "deployment_id",
             "evaluation_id", "name", "id")
#: At most this much of an answer is kept in memory to find the id it names.
_BODY_CAP = 64 * 1024


def record(store: Store, *, workspace: str, key_id: str, action: str, target: Optional[str],
           status_code: int, outcome: str, started: float, seconds: float) -> dict[str, Any]:
    """Write one audit record and return it."""
    rec = {"id": f"aud-{time.time_ns():x}-{secrets.token_hex(3)}", "workspace": workspace,
           "status": "ok" if outcome == "ok" else "error", "created_at": started,
           "key_id": key_id, "action": action, "target": target, "status_code": status_code,
           "outcome": outcome, "seconds": round(seconds, 4)}
    store.put(TABLE, rec)
    return rec


def view(rec: dict[str, Any]) -> dict[str, Any]:
    """The public shape of a record (``GET /v1/audit``)."""
    return {"audit_id": rec["id"], "time": rec["created_at"], "workspace": rec["workspace"],
            "key_id": rec["key_id"], "action": rec["action"], "target": rec.get("target"),
            "status_code": rec["status_code"], "outcome": rec["outcome"],
            "seconds": rec.get("seconds")}


def page_of(store: Store, workspace: Optional[str], offset: int,
            limit: int) -> tuple[list[dict[str, Any]], int]:
    """A page of records, newest first (``workspace=None``: every workspace)."""
    return store.list(TABLE, workspace=workspace, offset=offset, limit=limit, newest_first=True)


def api_routes(routes: Any) -> Iterator[Any]:
    """Every FastAPI route under ``routes`` (an app's or a router's), included routers too."""
    from fastapi.routing import APIRoute

    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif getattr(route, "original_router", None) is not None:  # FastAPI's include_router
            yield from api_routes(route.original_router.routes)
        elif getattr(route, "routes", None) is not None and not hasattr(route, "app"):
            yield from api_routes(route.routes)


def state_changing_routes(app: Any) -> list[Any]:
    """The app's routes that write an audit record (the methods of :data:`STATE_CHANGING`)."""
    return [r for r in api_routes(app.router.routes)
            if audited(r.path) and r.methods & STATE_CHANGING]


def audited(path: str) -> bool:
    """Whether a call to ``path`` (with a state-changing method) is recorded."""
    return path.startswith("/v1/") and not path.endswith(INFERENCE_SUFFIXES)


def _template(app: Any, scope: dict) -> tuple[str, dict[str, Any]]:
    """The route's path template and parameters; a call answered before routing (a body over
    the cap) is matched here."""
    route = scope.get("route")
    if getattr(route, "path", None):
        return route.path, dict(scope.get("path_params") or {})
    for candidate in state_changing_routes(app):
        found = candidate.path_regex.match(scope["path"])
        if found and scope["method"] in candidate.methods:
            return candidate.path, found.groupdict()
    return scope["path"], {}


def _answer_id(body: bytes) -> Optional[str]:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for name in ID_FIELDS:
        if isinstance(data.get(name), str):
            return data[name]
    return None


def _outcome(status: int, body: bytes) -> str:
    if status < 400:
        return "ok"
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"http_{status}"


class AuditLog:
    """ASGI middleware: after each state-changing ``/v1`` call of a known caller (the key the
    authentication middleware inside it found), one :func:`record`."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if (scope["type"] != "http" or scope["method"] not in STATE_CHANGING
                or not audited(scope["path"])):
            await self.app(scope, receive, send)
            return
        started, clock = time.time(), time.monotonic()
        answer: dict[str, Any] = {"status": 500, "json": False, "body": bytearray()}

        async def watch(message: dict) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                ctype = dict(message.get("headers") or []).get(b"content-type", b"")
                answer["json"] = b"json" in ctype
            elif (message["type"] == "http.response.body" and answer["json"]
                  and len(answer["body"]) < _BODY_CAP):
                answer["body"] += message.get("body", b"")[:_BODY_CAP]
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self._write(scope, answer, started, time.monotonic() - clock)

    def _write(self, scope: dict, answer: dict[str, Any], started: float,
               seconds: float) -> None:
        caller = (scope.get("state") or {}).get("caller")
        if caller is None:
            return  # refused for its key: no workspace to file it under
        app = scope["app"]
        path, params = _template(app, scope)
        body = bytes(answer["body"])
        target = "/".join(str(v) for v in params.values()) if params else None
        if target is None and answer["status"] < 400:
            target = _answer_id(body)
        try:
            record(app.state.ctx.store, workspace=caller.workspace, key_id=caller.key_id,
                   action=f"{scope['method']} {path}", target=target,
                   status_code=answer["status"], outcome=_outcome(answer["status"], body),
                   started=started, seconds=seconds)
        except Exception:  # the call itself is done: say the record is missing, loudly
            log.exception("could not write the audit record of %s %s", scope["method"], path)
