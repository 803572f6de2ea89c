"""``/v1/keys`` and ``/v1/whoami``: API keys of a workspace.

A non-admin key sees and revokes only itself; an admin key lists a workspace's keys and revokes
any key. A key's secret is shown once, in the answer that creates it: the store keeps its
sha256, and an ``Idempotency-Key`` replay answers without it.
"""

from __future__ import annotations

import time
from typing import Optional

from fastapi import APIRouter, Depends, Header, Request
from pydantic import BaseModel, Field

from rltune.sdk.errors import AuthError, ConflictError, NotFoundError
from rltune.server import schemas as M
from rltune.server.auth import Caller, authenticate, create_key, public_key
from rltune.server.context import ctx_of
from rltune.server.idempotency import fingerprint, idempotent
from rltune.server.openapi import V1_ERRORS, TypedRoute

router = APIRouter(prefix="/v1", tags=["keys"], route_class=TypedRoute,
                   responses=V1_ERRORS)
#: Workspace names become folder names (``published/<workspace>``): no '.', '..' or '/'.
WORKSPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"


class KeyCreate(BaseModel):
    name: str = Field("", max_length=128)
    workspace: Optional[str] = Field(
        None, min_length=1, max_length=64, pattern=WORKSPACE_PATTERN,
        description="an identifier: a letter or digit, then letters, digits, '_' or '-'")


@router.get("/whoami", response_model=M.WhoAmI)
def whoami(caller: Caller = Depends(authenticate)) -> dict:
    """The caller's key id, workspace and admin flag."""
    return {"key_id": caller.key_id, "workspace": caller.workspace, "admin": caller.admin}


@router.post("/keys", response_model=M.NewKey, status_code=201)
async def new_key(body: KeyCreate, request: Request, caller: Caller = Depends(authenticate),
                  idempotency_key: Optional[str] = Header(None)):
    """Create a key in the caller's workspace (admin: in any workspace, created when new)."""
    ctx = ctx_of(request)
    workspace = body.workspace or caller.workspace
    if workspace != caller.workspace and not caller.admin:
        raise AuthError("only an admin key can create keys for another workspace",
                        where="workspace", hint="omit 'workspace' or use the admin key")
    if workspace != "default":
        ctx.check_isolated(f"a key for workspace {workspace!r}")

    async def create():
        return 201, create_key(ctx.store, workspace, name=body.name)

    return await idempotent(ctx.store, caller.workspace, idempotency_key,
                            fingerprint("keys", body.model_dump()), create,
                            redact=lambda b: {**b, "api_key": None})


@router.get("/keys", response_model=M.KeyList)
def list_keys(request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """Admin: the keys of its workspace; other keys: only themselves (never secrets)."""
    rows, _ = ctx_of(request).store.list("keys", workspace=caller.workspace,
                                         statuses=["active", "revoked"])
    return {"items": [public_key(r) for r in rows if caller.admin or r["id"] == caller.key_id]}


@router.delete("/keys/{key_id}", response_model=M.KeyView)
def revoke_key(key_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """Revoke a key (admin: any key; other keys: only themselves); it answers 401 from now."""
    store = ctx_of(request).store
    visible = caller.admin or key_id == caller.key_id
    rec = store.get("keys", key_id) if visible else None
    if rec is None or not key_id.startswith("key-"):
        raise NotFoundError(f"no key {key_id!r}", where=key_id,
                            hint="list keys: GET /v1/keys (a non-admin key can revoke only "
                                 "itself)")
    new = store.update("keys", key_id, expect_status=["active"], status="revoked",
                       revoked_at=time.time())
    if new is None:
        raise ConflictError(f"key {key_id} is already revoked", where=key_id)
    return public_key(new)
