"""``GET /v1/audit``: the audit log (``rltune.server.audit``), newest first.

A key reads its own workspace's records (another workspace's answers 404); the admin key reads
every workspace's, or one with ``?workspace=NAME``.
"""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from rltune.sdk.errors import NotFoundError
from rltune.server import audit
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, page, page_query, paging
from rltune.server.schemas import Page

router = APIRouter(prefix="/v1", tags=["audit"])


class AuditEntry(BaseModel):
    """One state-changing call. Never a body, a query string, a header or a secret."""

    audit_id: str
    time: float = Field(description="when the call arrived (Unix seconds)")
    workspace: str = Field(description="the caller's workspace")
    key_id: str = Field(description="the caller's key (its id, never the secret)")
    action: str = Field(description="method and route, e.g. 'POST /v1/jobs/{job_id}/cancel'")
    target: Optional[str] = Field(None, description="the path parameters ('/'-joined), else "
                                  "the id the answer names (a new job's, file's, key's)")
    status_code: int
    outcome: str = Field(description="'ok', or the error code (not_found, conflict, ...)")
    seconds: Optional[float] = None


@router.get("/audit", response_model=Page[AuditEntry])
def list_audit(request: Request, caller: Caller = Depends(authenticate),
               page_q: tuple[int, int] = Depends(page_query),
               workspace: Optional[str] = Query(None, max_length=64,
                                                description="admin: one workspace's records "
                                                            "(default: all)")) -> dict:
    """State-changing calls of the caller's workspace (admin: all workspaces)."""
    if workspace is not None and workspace != caller.workspace and not caller.admin:
        # as for any resource of another workspace: not found, never "forbidden"
        raise NotFoundError(f"no audit log of workspace {workspace!r} for this key",
                            where="workspace", hint="omit 'workspace' to read your own (the "
                            "admin key reads every workspace's)")
    scope = workspace if caller.admin else caller.workspace
    off, lim = paging(*page_q)
    rows, total = audit.page_of(ctx_of(request).store, scope, off, lim)
    return page([audit.view(r) for r in rows], total, *page_q)
