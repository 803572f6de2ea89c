"""``/v1/jobs`` (and the cloud's ``/v1/fine-tunes`` aliases): submit, list, get, cancel,
resume, delete (copy and stop: ``routes/jobops.py``)."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from rltune.doctor.plan import anti_patterns, model_parameters
from rltune.jobdir import JobDir
from rltune.names import OptionalJobName
from rltune.sdk.errors import ConflictError, ValidationError
from rltune.server import schemas as M
from rltune.server import states as S
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ServerContext, ctx_of, page, paging
from rltune.server.errors import path_hider
from rltune.server.idempotency import fingerprint, idempotent
from rltune.server.jobdata import job_config, latest_metric, list_checkpoints, read_progress
from rltune.server.openapi import V1_ERRORS, TypedRoute
from rltune.server.redact import masked
from rltune.server.submit import fetch_url_datasets, parse_config, resolve

router = APIRouter(prefix="/v1", tags=["jobs"], route_class=TypedRoute,
                   responses=V1_ERRORS)
HINT = "list jobs: GET /v1/jobs"


def job_view(ctx: ServerContext, rec: dict, detail: bool = False) -> dict[str, Any]:
    job_dir = ctx.executor.job_dir(rec["id"])
    progress = read_progress(job_dir)
    latest = (progress or {}).get("reward")
    if latest is None and progress is not None:
        latest = latest_metric(job_dir, "critic/rewards/mean")
    hide = path_hider(ctx.settings.home)  # a tenant sees no server path
    out = {"job_id": rec["id"], "job_name": rec["job_name"], "status": rec["status"],
           "model": rec["model"], "algorithm": rec["algorithm"],
           "training_type": rec["training_type"], "created_at": rec["created_at"],
           "started_at": rec.get("started_at"), "finished_at": rec.get("finished_at"),
           "progress": progress, "latest_reward": latest,
           "training_file_ids": rec["training_file_ids"],
           "validation_file_ids": rec["validation_file_ids"],
           "resume_from": rec.get("resume_from"), "error": hide(rec.get("error")),
           "published_model": rec.get("published_model"),
           "publish_error": rec.get("publish_error"),
           "copied_from": rec.get("copied_from"),
           "stop_requested_at": rec.get("stop_requested_at"),
           "project": rec.get("project"), "tags": rec.get("tags") or {}}
    if detail:
        from rltune.config.yaml_io import dump_yaml

        config = masked(job_config(job_dir, rec))
        out.update(config=config, config_yaml=dump_yaml(config),
                   checkpoints=len(list_checkpoints(job_dir)), exit_code=rec.get("exit_code"))
    return out


class JobCreate(BaseModel):
    config: Optional[dict[str, Any]] = Field(None, description="a JobConfig (SDK YAML shape)")
    config_yaml: Optional[str] = Field(None, max_length=1_000_000)
    job_name: OptionalJobName = None


async def _create(body: JobCreate, request: Request, caller: Caller,
                  idempotency_key: Optional[str], extra: Optional[dict[str, Any]] = None):
    ctx = ctx_of(request)
    # Parsing and validating a config is CPU work: off the event loop, /health stays quick.
    job = await asyncio.to_thread(parse_config, body.config, body.config_yaml, body.job_name)

    async def create():
        nonlocal job
        job = await fetch_url_datasets(ctx, caller.workspace, job)
        runnable, facts = await asyncio.to_thread(resolve, ctx, caller.workspace, job)
        job_id = f"ft-{secrets.token_hex(8)}"
        job_dir = ctx.executor.job_dir(job_id)
        job_dir.mkdir(parents=True)
        (job_dir / "job.yaml").write_text(runnable.to_yaml_text())
        (job_dir / "job.json").write_text(json.dumps({"job_id": job_id,
                                                      "workspace": caller.workspace}))
        (job_dir / "config.json").write_text(json.dumps(job.to_dict(), default=str))
        rec = {"id": job_id, "workspace": caller.workspace, "status": S.PENDING,
               "created_at": time.time(), "job_name": job.name, "model": job.model.name,
               "algorithm": job.hyper_parameters.algorithm,
               "training_type": job.training.type.value, "project": job.project,
               "tags": dict(job.tags), **facts, **(extra or {})}
        parameters = await asyncio.to_thread(  # file reads: off the event loop
            model_parameters, job.model.name or "", home=ctx.settings.home,
            workspace=caller.workspace)
        warnings = anti_patterns(job, parameters=parameters)  # warned, not refused
        for warning in warnings:
            JobDir(job_dir).append_log(f"warning: {warning}", level="WARNING")
        ctx.store.put("jobs", rec)
        ctx.executor.wake()
        return 201, {**job_view(ctx, rec), "warnings": warnings}

    return await idempotent(ctx.store, caller.workspace, idempotency_key,
                            fingerprint("jobs", body.model_dump()), create,
                            created=("jobs", "job_id"))


async def _job_body(request: Request) -> JobCreate:
    """The body as a ``JobCreate``, decoded and validated off the event loop (a config may be
    up to ``max_json_bytes``, ``rltune.server.bodycap``)."""
    raw = await request.body()
    try:
        return await asyncio.to_thread(_decode_job, raw)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, PydanticValidationError):
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])}
                                          for e in exc.errors(include_url=False)]) from None
        raise HTTPException(400, f"the body is not JSON: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from None


def _decode_job(raw: bytes) -> JobCreate:
    return JobCreate.model_validate(json.loads(raw) if raw else None)


_BODY_SCHEMA = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": JobCreate.model_json_schema()}}}}


@router.post("/jobs", response_model=M.JobSubmitted, status_code=201,
             openapi_extra=_BODY_SCHEMA)
async def create_job(request: Request, caller: Caller = Depends(authenticate),
                     idempotency_key: Optional[str] = Header(None)):
    """Submit a job; it starts when a slot is free (``max_concurrent_jobs``). The body is a
    ``JobCreate``: ``{"config": {...}}`` or ``{"config_yaml": "..."}``, plus ``job_name``.
    The answer's ``warnings`` are the job's hyper-parameter anti-patterns (it runs anyway)."""
    return await _create(await _job_body(request), request, caller, idempotency_key)


def _statuses(status: Optional[str]) -> Optional[list[str]]:
    if not status:
        return None
    wanted = [s.strip().upper() for s in status.split(",") if s.strip()]
    bad = [s for s in wanted if s not in S.STATES]
    if bad:
        raise ValidationError(f"unknown status {bad[0]!r}", where="status",
                              hint=f"use one or more of {', '.join(S.STATES)}")
    return wanted


@router.get("/jobs", response_model=M.Page[M.JobView])
def list_jobs(request: Request, page_no: int = Query(1, ge=1, le=10**6),
              page_size: int = Query(10, ge=1, le=500), status: Optional[str] = Query(None),
              project: Optional[str] = Query(None, max_length=128),
              tag: list[str] = Query([], description="KEY or KEY=VALUE; repeat for all of them"),
              algorithm: Optional[str] = Query(None, max_length=32),
              caller: Caller = Depends(authenticate)) -> dict:
    """Jobs of the workspace, newest first, optionally filtered by status, ``project``,
    ``tag`` (Ark's job metadata) and ``algorithm``."""
    ctx = ctx_of(request)
    off, lim = paging(page_no, page_size)
    if project is None and not tag and algorithm is None:
        rows, total = ctx.store.list("jobs", workspace=caller.workspace,
                                     statuses=_statuses(status), offset=off, limit=lim,
                                     newest_first=True)
        return page([job_view(ctx, r) for r in rows], total, page_no, page_size)
    from rltune.server.job_filters import matches, parse_tags

    wanted = parse_tags(tag)
    rows, _ = ctx.store.list("jobs", workspace=caller.workspace, statuses=_statuses(status),
                             newest_first=True)
    kept = [r for r in rows if matches(r, project=project, tags=wanted, algorithm=algorithm)]
    return page([job_view(ctx, r) for r in kept[off:off + lim]], len(kept), page_no, page_size)


@router.get("/jobs/{job_id}", response_model=M.JobDetail)
def get_job(job_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    ctx = ctx_of(request)
    return job_view(ctx, ctx.owned("jobs", job_id, caller.workspace, "job", HINT), detail=True)


@router.post("/jobs/{job_id}/cancel", response_model=M.JobDetail)
async def cancel_job(job_id: str, request: Request,
                     caller: Caller = Depends(authenticate)) -> dict:
    """Cancel: a PENDING job never starts; a RUNNING job's process group is killed."""
    ctx = ctx_of(request)
    rec = ctx.owned("jobs", job_id, caller.workspace, "job", HINT)
    S.check_move(job_id, rec["status"], S.CANCELED, "cancel")
    new = ctx.store.update("jobs", job_id, expect_status=[rec["status"]], status=S.CANCELED,
                           finished_at=time.time())
    if new is None:  # it moved meanwhile (e.g. finished)
        now = ctx.store.get("jobs", job_id) or rec
        S.check_move(job_id, now["status"], S.CANCELED, "cancel")
        raise ConflictError(f"job {job_id} changed state while cancelling", where=job_id,
                            hint="retry")
    if rec["status"] == S.RUNNING:
        await ctx.executor.kill(job_id)
    return job_view(ctx, ctx.store.get("jobs", job_id) or new, detail=True)


class ResumeRequest(BaseModel):
    checkpoint: Optional[str] = Field(None, pattern=r"^checkpoint-\d+$")


@router.post("/jobs/{job_id}/resume", response_model=M.JobDetail)
def resume_job(job_id: str, request: Request, body: Optional[ResumeRequest] = None,
               caller: Caller = Depends(authenticate)) -> dict:
    """Queue a FAILED/CANCELED/STOPPED job again, continuing from a checkpoint (default: the
    latest)."""
    ctx = ctx_of(request)
    rec = ctx.owned("jobs", job_id, caller.workspace, "job", HINT)
    S.check_move(job_id, rec["status"], S.PENDING, "resume")
    ckpts = list_checkpoints(ctx.executor.job_dir(job_id))
    wanted = body.checkpoint if body else None
    chosen = [c for c in ckpts if c["name"] == wanted] if wanted else ckpts[-1:]
    if wanted and not chosen:
        raise ValidationError(f"job {job_id} has no {wanted}", where="checkpoint",
                              hint="list them: GET /v1/jobs/{job_id}/checkpoints")
    resume_from = chosen[-1]["path"] if chosen else None
    JobDir(ctx.executor.job_dir(job_id)).stop_request.unlink(missing_ok=True)  # an old `stop`
    new = ctx.store.update("jobs", job_id, expect_status=[rec["status"]], status=S.PENDING,
                           resume_from=resume_from, error=None, finished_at=None,
                           resumed_at=time.time(), stop_requested_at=None)
    if new is None:
        raise ConflictError(f"job {job_id} changed state while resuming", where=job_id,
                            hint="retry")
    ctx.executor.wake()
    return job_view(ctx, new, detail=True)


@router.delete("/jobs/{job_id}", response_model=M.JobDeleted)
def delete_job(job_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """Delete a job that is not running, with its outputs."""
    ctx = ctx_of(request)
    rec = ctx.owned("jobs", job_id, caller.workspace, "job", HINT)
    if rec["status"] == S.RUNNING:
        raise ConflictError(f"job {job_id} is RUNNING", where=job_id,
                            hint=f"cancel it first: POST /v1/jobs/{job_id}/cancel")
    ctx.store.delete("jobs", job_id)
    shutil.rmtree(Path(ctx.executor.job_dir(job_id)), ignore_errors=True)
    return {"job_id": job_id, "deleted": True}


# The cloud SDK's paths (``/fine-tunes…``, what its client calls), same handlers.
router.add_api_route("/fine-tunes", create_job, methods=["POST"], status_code=201,
                     include_in_schema=False)
router.add_api_route("/fine-tunes", list_jobs, methods=["GET"], include_in_schema=False)
router.add_api_route("/fine-tunes/{job_id}", get_job, methods=["GET"], include_in_schema=False)
router.add_api_route("/fine-tunes/{job_id}", delete_job, methods=["DELETE"],
                     include_in_schema=False)
router.add_api_route("/fine-tunes/{job_id}/cancel", cancel_job, methods=["POST"],
                     include_in_schema=False)
