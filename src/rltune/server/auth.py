"""API keys and workspaces: bearer keys (stored as sha256), an admin key on first start.

A key belongs to one workspace; a resource of another workspace is reported as not found.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from fastapi import Request

from rltune.sdk.errors import AuthError, ConflictError
from rltune.server.store import Store

KEY_PREFIX = "rlt-"


class UnisolatedWorkspaceError(AuthError):
    """A valid key of a second workspace on a server that cannot (or no longer can) sandbox
    function code: refused at every request, not only when the key was created."""

    http_status = 403
    code = "forbidden"


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's id, its workspace and whether it is an admin key."""

    key_id: str
    workspace: str
    admin: bool


def ensure_workspace(store: Store, name: str) -> None:
    if store.get("workspaces", name) is None:
        store.put("workspaces", {"id": name, "workspace": name, "status": "active",
                                 "created_at": time.time()})


def create_key(store: Store, workspace: str, name: str = "", admin: bool = False) -> dict:
    """Create a key; the returned record carries the secret (``api_key``) once."""
    ensure_workspace(store, workspace)
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = f"key-{secrets.token_hex(6)}"
    rec = {"id": key_id, "workspace": workspace, "status": "active", "created_at": time.time(),
           "name": name, "admin": admin, "sha256": hash_key(secret), "revoked_at": None}
    store.put("keys", rec)
    # The lookup by secret goes through a second row keyed by the hash (an indexed primary key).
    store.put("keys", {"id": f"h:{rec['sha256']}", "workspace": workspace, "status": "index",
                       "created_at": rec["created_at"], "key_id": key_id})
    return {**public_key(rec), "api_key": secret}


def public_key(rec: dict) -> dict:
    return {"key_id": rec["id"], "name": rec.get("name", ""), "workspace": rec["workspace"],
            "admin": bool(rec.get("admin")), "created_at": rec["created_at"],
            "revoked_at": rec.get("revoked_at")}


def lookup(store: Store, secret: str) -> Optional[Caller]:
    index = store.get("keys", f"h:{hash_key(secret)}")
    if index is None:
        return None
    rec = store.get("keys", index["key_id"])
    if rec is None or rec["status"] != "active":
        return None
    return Caller(rec["id"], rec["workspace"], bool(rec.get("admin")))


def bootstrap_admin_key(store: Store, path: Path) -> str:
    """Return the admin key, creating it (file mode 0600) on first start or if it is revoked."""
    if path.is_file():
        secret = path.read_text().strip()
        if lookup(store, secret) is not None:
            return secret
    secret = create_key(store, "default", name="admin", admin=True)["api_key"]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    os.replace(tmp, path)
    return secret


def authenticate(request: Request) -> Caller:
    """FastAPI dependency: the caller of a ``/v1`` route, or 401.

    The app's middleware calls it first, before a body is read or validated (a request
    without a valid key gets 401, never 422); the route reuses that answer.
    """
    known = getattr(request.state, "caller", None)
    if known is not None:
        return known
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise AuthError("missing API key", where="Authorization header",
                        hint="send 'Authorization: Bearer <key>' (the local admin key is in "
                             "$RLTUNE_HOME/server/admin.key)")
    caller = lookup(request.app.state.ctx.store, secret.strip())
    if caller is None:
        raise AuthError("invalid or revoked API key", where="Authorization header",
                        hint="create a key with POST /v1/keys or use the admin key")
    if caller.workspace != "default":
        try:  # the server may have lost its sandbox since the key was made (bwrap removed)
            request.app.state.ctx.check_isolated(f"the key {caller.key_id} of workspace "
                                                 f"{caller.workspace!r}")
        except ConflictError as exc:
            raise UnisolatedWorkspaceError(exc.message, where="Authorization header",
                                           hint=exc.hint) from None
    request.state.caller = caller
    return caller
