"""``/v1/functions`` and ``/v1/instances``: register workspace archives, load and test them.

An upload is extracted with every safety check of ``rltune.functions.archive`` (no absolute or
``..`` paths, no symlinks, size limits) before ``FunctionRegistry`` registers it, so an unsafe
archive never reaches disk outside a staging folder. Instances are read and changed only through
``ctx.instances`` (``rltune.server.instances.InstanceManager``), the one owner of their records.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Depends, Header, Query, Request
from pydantic import BaseModel, Field

from rltune.functions.archive import extract_archive
from rltune.sdk.data import FunctionType
from rltune.sdk.errors import NotFoundError, ValidationError
from rltune.server import schemas as M
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, page, paging, read_body_limited
from rltune.server.idempotency import fingerprint, idempotent
from rltune.server.openapi import V1_ERRORS, TypedRoute, media

router = APIRouter(prefix="/v1", tags=["functions"], route_class=TypedRoute,
                   responses=V1_ERRORS)
FN_HINT = "list functions: GET /v1/functions"


def function_view(rec: dict) -> dict:
    return {"entity_id": rec["id"], "type": rec["type"], "name": rec["name"],
            "classpath": rec["classpath"], "archive_sha256": rec["archive_sha256"],
            "archive_size": rec["archive_size"], "files": rec["files"],
            "created_at": rec["created_at"]}


@router.post("/functions", response_model=M.FunctionView, status_code=201)
async def register_function(
        request: Request,
        classpath: str = Query(..., min_length=3, max_length=512,
                               description="'pkg.module.Class' or 'path/file.py:Class'"),
        type: FunctionType = Query(FunctionType.ROLLOUT),
        name: Optional[str] = Query(None, min_length=1, max_length=128),
        caller: Caller = Depends(authenticate),
        idempotency_key: Optional[str] = Header(None)):
    """Register a function from a workspace zip sent as the raw body; returns ``ro-…``/``rw-…``."""
    ctx = ctx_of(request)
    data = await read_body_limited(request, ctx.settings.max_upload_bytes, "the archive")

    async def create():
        staging = Path(tempfile.mkdtemp(prefix="upload-", dir=ctx.settings.server_dir))
        try:
            (staging / "upload.zip").write_bytes(data)
            ws = extract_archive(staging / "upload.zip", staging / "ws")
            entity = ctx.registry.register(classpath, type, ws, name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        rec = {"id": entity.entity_id, "workspace": caller.workspace, "status": "registered",
               "created_at": entity.created_at, "type": entity.func_type.value,
               "name": entity.name, "classpath": entity.classpath,
               "archive_sha256": entity.archive_sha256, "archive_size": entity.archive_size,
               "files": entity.files}
        ctx.store.put("functions", rec)
        return 201, function_view(rec)

    return await idempotent(ctx.store, caller.workspace, idempotency_key,
                            fingerprint("functions", classpath, type.value, name, data), create,
                            created=("functions", "entity_id"))


@router.get("/functions", response_model=M.Page[M.FunctionView])
def list_functions(request: Request, page_no: int = Query(1, ge=1, le=10**6),
                   page_size: int = Query(50, ge=1, le=500),
                   type: Optional[FunctionType] = Query(None),
                   caller: Caller = Depends(authenticate)) -> dict:
    rows, _ = ctx_of(request).store.list("functions", workspace=caller.workspace,
                                         newest_first=True)
    if type is not None:
        rows = [r for r in rows if r["type"] == type.value]
    off, lim = paging(page_no, page_size)
    return page([function_view(r) for r in rows[off:off + lim]], len(rows), page_no, page_size)


@router.get("/functions/{entity_id}", response_model=M.FunctionView)
def get_function(entity_id: str, request: Request,
                 caller: Caller = Depends(authenticate)) -> dict:
    return function_view(ctx_of(request).owned("functions", entity_id, caller.workspace,
                                               "function", FN_HINT))


@router.get("/functions/{entity_id}/archive", **media("application/zip"))
def get_function_archive(entity_id: str, request: Request,
                         caller: Caller = Depends(authenticate)):
    """The workspace zip the function was registered from (``rltune ark pull mcj``)."""
    from fastapi.responses import FileResponse

    ctx = ctx_of(request)
    rec = ctx.owned("functions", entity_id, caller.workspace, "function", FN_HINT)
    path = ctx.registry.root / "archives" / f"{rec['archive_sha256']}.zip"
    if not path.is_file():
        raise NotFoundError(f"the archive of {entity_id} is gone", where=entity_id,
                            hint="register the function again")
    return FileResponse(path, media_type="application/zip", filename=f"{entity_id}.zip")


@router.delete("/functions/{entity_id}", response_model=M.FunctionDeleted)
async def delete_function(entity_id: str, request: Request,
                          caller: Caller = Depends(authenticate)) -> dict:
    """Forget a function; its loaded instances are stopped (jobs keep their own copies)."""
    ctx = ctx_of(request)
    ctx.owned("functions", entity_id, caller.workspace, "function", FN_HINT)
    await ctx.instances.stop_entity(caller.workspace, entity_id)
    ctx.store.delete("functions", entity_id)
    return {"entity_id": entity_id, "deleted": True}


class LoadRequest(BaseModel):
    runtime: Optional[dict[str, Any]] = None
    timeout: Optional[float] = Field(None, gt=0, le=86400)


@router.post("/functions/{entity_id}/load", response_model=M.InstanceView, status_code=201)
async def load_function(entity_id: str, body: LoadRequest, request: Request,
                        caller: Caller = Depends(authenticate),
                        idempotency_key: Optional[str] = Header(None)):
    """Start a pool for the function inside the server; returns the instance (``…-ins-…``)."""
    from rltune.config.components import FunctionComponentRuntime

    ctx = ctx_of(request)
    ctx.owned("functions", entity_id, caller.workspace, "function", FN_HINT)
    try:
        runtime = FunctionComponentRuntime.model_validate(body.runtime or {})
    except Exception as exc:
        raise ValidationError(f"bad runtime: {exc}", where="runtime",
                              hint="see FunctionComponentRuntime fields") from None

    async def create():
        return 201, await ctx.instances.load(caller.workspace, entity_id,
                                             runtime.model_dump(exclude_none=True), body.timeout)

    return await idempotent(ctx.store, caller.workspace, idempotency_key,
                            fingerprint("load", entity_id, body.model_dump()), create)


@router.get("/instances", response_model=M.Page[M.InstanceView])
def list_instances(request: Request, page_no: int = Query(1, ge=1, le=10**6),
                   page_size: int = Query(50, ge=1, le=500),
                   caller: Caller = Depends(authenticate)) -> dict:
    off, lim = paging(page_no, page_size)
    views, total = ctx_of(request).instances.list(caller.workspace, off, lim)
    return page(views, total, page_no, page_size)


@router.get("/instances/{instance_id}", response_model=M.InstanceView)
def get_instance(instance_id: str, request: Request,
                 caller: Caller = Depends(authenticate)) -> dict:
    return ctx_of(request).instances.get(caller.workspace, instance_id)


class TestRequest(BaseModel):
    input: dict[str, Any]
    type: Optional[FunctionType] = None


@router.post("/instances/{instance_id}/test", response_model=M.InstanceTest)
async def test_instance(instance_id: str, body: TestRequest, request: Request,
                        caller: Caller = Depends(authenticate)) -> dict:
    """Send one input to a loaded instance; the output is validated by its type's model."""
    return await ctx_of(request).instances.test(
        caller.workspace, instance_id, body.input, body.type.value if body.type else None)


@router.get("/instances/{instance_id}/logs", response_model=M.InstanceLogs)
def instance_logs(instance_id: str, request: Request, offset: int = Query(1, ge=1),
                  lines: int = Query(1000, ge=1, le=100000),
                  caller: Caller = Depends(authenticate)) -> dict:
    """Events of the instance (load, tests, stop), 1-based ``offset``."""
    events = ctx_of(request).instances.events(caller.workspace, instance_id)
    chunk = events[offset - 1: offset - 1 + lines]
    return {"instance_id": instance_id, "logs": chunk, "offset": offset,
            "next_offset": offset + len(chunk), "total": len(events)}


@router.delete("/instances/{instance_id}", response_model=M.InstanceDeleted)
async def delete_instance(instance_id: str, request: Request,
                          caller: Caller = Depends(authenticate)) -> dict:
    await ctx_of(request).instances.delete(caller.workspace, instance_id)
    return {"instance_id": instance_id, "deleted": True}
