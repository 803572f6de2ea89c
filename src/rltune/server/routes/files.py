"""``/v1/files``: JSONL datasets, validated row by row at upload (errors name the line)."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from typing import Optional

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import FileResponse

from rltune.config.data import parse_rows
from rltune.sdk.errors import DatasetError
from rltune.server import schemas as M
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, page, paging, read_body_limited
from rltune.server.idempotency import fingerprint, idempotent
from rltune.server.openapi import V1_ERRORS, TypedRoute, media

router = APIRouter(prefix="/v1", tags=["files"], route_class=TypedRoute,
                   responses=V1_ERRORS)
HINT = "list files: GET /v1/files"


def file_view(rec: dict) -> dict:
    return {"file_id": rec["id"], "filename": rec["filename"], "bytes": rec["bytes"],
            "rows": rec["rows"], "sha256": rec["sha256"], "purpose": rec["purpose"],
            "description": rec.get("description"), "created_at": rec["created_at"]}


@router.post("/files", response_model=M.FileView, status_code=201)
async def upload_file(request: Request,
                      filename: str = Query(..., min_length=1, max_length=255),
                      purpose: str = Query("fine-tune", max_length=64),
                      description: Optional[str] = Query(None, max_length=1024),
                      caller: Caller = Depends(authenticate),
                      idempotency_key: Optional[str] = Header(None)):
    """Upload a JSONL dataset as the raw request body; returns ``file-…``."""
    ctx = ctx_of(request)
    data = await read_body_limited(request, ctx.settings.max_upload_bytes, "the file")
    name = os.path.basename(filename.replace("\\", "/")) or "data.jsonl"

    async def create():
        return 201, file_view(store_file(ctx, caller.workspace, name, data, purpose,
                                         description))

    return await idempotent(ctx.store, caller.workspace, idempotency_key,
                            fingerprint("files", name, purpose, data), create,
                            created=("files", "file_id"))


def store_file(ctx, workspace: str, name: str, data: bytes, purpose: str = "fine-tune",
               description: Optional[str] = None) -> dict:
    """Validate a JSONL dataset row by row and keep it; returns the file record."""
    try:
        text = data.decode("utf-8", errors="strict") if data else ""
    except UnicodeDecodeError as exc:
        raise DatasetError(f"the file is not UTF-8 text (byte {exc.start})", where=name,
                           hint="save the JSONL as UTF-8; a parquet file or a saved datasets "
                           "folder goes through `rltune upload-data` or `rltune run`, which "
                           "send it as JSONL") from None
    rows = parse_rows(text.splitlines(), source=name)  # DatasetError names file:line
    if not rows:
        raise DatasetError(f"{name} has no rows", where=name,
                           hint="upload a JSONL file with one JSON object per line")
    file_id = f"file-{secrets.token_hex(8)}"
    path = ctx.settings.files_dir / workspace / f"{file_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    rec = {"id": file_id, "workspace": workspace, "status": "ok",
           "created_at": time.time(), "filename": name, "bytes": len(data),
           "rows": len(rows), "sha256": hashlib.sha256(data).hexdigest(),
           "purpose": purpose, "description": description, "path": str(path)}
    ctx.store.put("files", rec)
    return rec


@router.get("/files", response_model=M.Page[M.FileView])
def list_files(request: Request, page_no: int = Query(1, ge=1, le=10**6),
               page_size: int = Query(50, ge=1, le=500),
               caller: Caller = Depends(authenticate)) -> dict:
    off, lim = paging(page_no, page_size)
    rows, total = ctx_of(request).store.list("files", workspace=caller.workspace, offset=off,
                                             limit=lim, newest_first=True)
    return page([file_view(r) for r in rows], total, page_no, page_size)


@router.get("/files/{file_id}", response_model=M.FileView)
def get_file(file_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    return file_view(ctx_of(request).owned("files", file_id, caller.workspace, "file", HINT))


@router.get("/files/{file_id}/content", **media("application/jsonl"))
def file_content(file_id: str, request: Request, caller: Caller = Depends(authenticate)):
    rec = ctx_of(request).owned("files", file_id, caller.workspace, "file", HINT)
    return FileResponse(rec["path"], media_type="application/jsonl", filename=rec["filename"])


@router.delete("/files/{file_id}", response_model=M.FileDeleted)
def delete_file(file_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    ctx = ctx_of(request)
    rec = ctx.owned("files", file_id, caller.workspace, "file", HINT)
    ctx.store.delete("files", file_id)
    with __import__("contextlib").suppress(OSError):
        os.unlink(rec["path"])
    return {"file_id": file_id, "deleted": True}
