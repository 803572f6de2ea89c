"""``/v1/models``: publish a job's checkpoint as a named model, list, show, delete, export.

``POST /v1/models`` ``{job_id, checkpoint: N|best|last, name}`` (also
``POST /v1/jobs/{job_id}/publish``) links the checkpoint's files into the model registry, so
the model outlives its job. A job config may then say ``model: <name>``.
"""

from __future__ import annotations

from typing import Union

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from rltune.lifecycle.publish import NAME_PATTERN
from rltune.server import published as P
from rltune.server import schemas as M
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, page, paging
from rltune.server.openapi import V1_ERRORS, TypedRoute, media

router = APIRouter(prefix="/v1", tags=["models"], route_class=TypedRoute,
                   responses=V1_ERRORS)


class PublishRequest(BaseModel):
    name: str = Field(..., pattern=NAME_PATTERN, description="the model's name in the workspace")
    checkpoint: Union[int, str, None] = Field(
        "best", description="a step number, 'best' (highest validation reward) or 'last'")
    description: str = Field("", max_length=2000)


class PublishJobRequest(PublishRequest):
    job_id: str = Field(..., min_length=1, max_length=64)


def _publish(request: Request, caller: Caller, job_id: str, body: PublishRequest) -> dict:
    ctx = ctx_of(request)
    job = ctx.owned("jobs", job_id, caller.workspace, "job", "list jobs: GET /v1/jobs")
    rec = P.publish(ctx.store, ctx.settings.home, ctx.settings.jobs_dir, caller.workspace, job,
                    body.checkpoint, body.name, description=body.description)
    return P.model_view(rec)


@router.post("/models", response_model=M.ModelView, status_code=201)
def publish_model(body: PublishJobRequest, request: Request,
                  caller: Caller = Depends(authenticate)) -> dict:
    """Publish a checkpoint of a job (any state) as a model."""
    return _publish(request, caller, body.job_id, body)


@router.post("/jobs/{job_id}/publish", response_model=M.ModelView, status_code=201)
def publish_job_checkpoint(job_id: str, body: PublishRequest, request: Request,
                           caller: Caller = Depends(authenticate)) -> dict:
    """Same as ``POST /v1/models`` with the job in the path."""
    return _publish(request, caller, job_id, body)


@router.get("/models", response_model=M.Page[M.ModelView])
def list_models(request: Request, page_no: int = Query(1, ge=1, le=10**6),
                page_size: int = Query(50, ge=1, le=500),
                caller: Caller = Depends(authenticate)) -> dict:
    """Published models of the workspace, newest first."""
    ctx = ctx_of(request)
    off, lim = paging(page_no, page_size)
    rows, total = ctx.store.list("models", workspace=caller.workspace, offset=off, limit=lim,
                                 newest_first=True)
    return page([P.model_view(r) for r in rows], total, page_no, page_size)


@router.get("/models/{name}", response_model=M.ModelDetail)
def get_model(name: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    rec = P.get_model(ctx_of(request).store, caller.workspace, name)
    from rltune.lifecycle.export import model_files

    return P.model_view(rec) | {"files": model_files(rec["path"])}


@router.delete("/models/{name}", response_model=M.ModelDeleted)
def delete_model(name: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """Delete a model that no running deployment serves, with its files."""
    P.delete_model(ctx_of(request).store, caller.workspace, name)
    return {"name": name, "deleted": True}


@router.get("/models/{name}/export", **media("application/gzip"))
def export_model(name: str, request: Request, background: BackgroundTasks,
                 part: str = Query("merged", pattern="^(merged|adapter)$"),
                 caller: Caller = Depends(authenticate)) -> FileResponse:
    """The model as a ``.tar.gz``: ``merged`` = a Hugging Face folder (LoRA merged into the
    weights), ``adapter`` = the LoRA adapter alone (peft format)."""
    from rltune.lifecycle.export import export_archive

    rec = P.get_model(ctx_of(request).store, caller.workspace, name)
    path = export_archive(rec["path"], part, name)
    background.add_task(path.unlink, missing_ok=True)
    return FileResponse(path, media_type="application/gzip",
                        filename=f"{name}-{part}.tar.gz")




class PushRequest(BaseModel):
    repo_id: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$",
                         max_length=200, description="owner/name on the hub")
    part: str = Field("merged", pattern="^(merged|adapter)$")
    private: bool = True


@router.post("/models/{name}/push", response_model=M.ModelPushed)
async def push_model(name: str, body: PushRequest, request: Request,
                     caller: Caller = Depends(authenticate)) -> dict:
    """Upload the model to a Hugging Face hub with the server's ``HF_TOKEN``
    (``HF_ENDPOINT`` for a self-hosted hub); answers with the commit URL."""
    from rltune.lifecycle.export import check_part
    from rltune.lifecycle.hub import push_in_subprocess

    rec = P.get_model(ctx_of(request).store, caller.workspace, name)
    check_part(rec["path"], body.part)
    url = await push_in_subprocess(rec["path"], body.repo_id, body.part, body.private)
    return {"name": name, "repo_id": body.repo_id, "part": body.part, "commit_url": url}
