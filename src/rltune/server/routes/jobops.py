"""Job operations beyond submit/cancel/resume (Volcano Ark's 复制 and 停止), and the
hyper-parameters form of the console's job creation.

- ``POST /v1/jobs/{id}/copy`` ``{"overrides": {"dotted.key": value}, "config_yaml", "job_name"}``
  → ``201`` and the new job: the source's config as submitted (its file and function ids),
  the edited YAML when given (masked secrets, ``***``, keep the source's values), then the
  overrides (``rltune.config.overrides``: dotted keys, or objects merged as JSON merge-patch);
  validated like any submit, so a bad override is a ``422`` naming its field.
- ``POST /v1/jobs/{id}/stop`` → ``202``: a RUNNING job ends at its next step boundary with a
  checkpoint and becomes ``STOPPED`` (a finished run: publishable, resumable). Unlike cancel,
  nothing is killed; the request is a file in the job folder the trainer reads after each step
  (``JobDir.request_stop``).
- ``GET /v1/hyperparameters``: every hyper-parameter of a job (``training.hyper_parameters``)
  with its type, default, range, choices and description.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, Optional

from fastapi import APIRouter, Depends, Header, Request
from pydantic import BaseModel, Field

from rltune.config.overrides import apply_overrides
from rltune.jobdir import JobDir
from rltune.names import OptionalJobName
from rltune.sdk.errors import ConflictError, ValidationError
from rltune.server import schemas as M
from rltune.server import states as S
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of
from rltune.server.jobdata import job_config
from rltune.server.openapi import V1_ERRORS, TypedRoute
from rltune.server.redact import MASK
from rltune.server.routes.jobs import HINT, JobCreate, _create, job_view

router = APIRouter(prefix="/v1", tags=["jobs"], route_class=TypedRoute,
                   responses=V1_ERRORS)


class JobCopy(BaseModel):
    overrides: dict[str, Any] = Field(
        default_factory=dict, description='changes, e.g. {"training.hyper_parameters.'
        'learning_rate": 1e-5}; a bare hyper-parameter name is short for its place; an '
        'object merges into its section (JSON merge-patch: null removes a key)')
    config_yaml: Optional[str] = Field(
        None, max_length=1_000_000, description="the source's config as edited (the console's "
        "editor); masked secrets (***) keep the source's values")
    job_name: OptionalJobName = None


def unmasked(edited: Any, source: Any) -> Any:
    """``edited`` with each masked value (``***``) put back from ``source`` at the same place
    (the console shows configs masked, ``rltune.server.redact``)."""
    if edited == MASK:
        return source
    if isinstance(edited, dict):
        src = source if isinstance(source, dict) else {}
        return {k: unmasked(v, src.get(k)) for k, v in edited.items()}
    if isinstance(edited, list):
        src = source if isinstance(source, list) else []
        return [unmasked(v, src[i] if i < len(src) else None) for i, v in enumerate(edited)]
    return edited


def _edited(text: str, source: dict[str, Any]) -> dict[str, Any]:
    from rltune.config.yaml_io import read_yaml_text

    data = read_yaml_text(text, source="config_yaml").data
    if not isinstance(data, dict):
        raise ValidationError("config_yaml is not a mapping", where="config_yaml",
                              hint="send the job's YAML (GET /v1/jobs/{id} has config_yaml)")
    return unmasked(data, source)


@router.post("/jobs/{job_id}/copy", response_model=M.JobSubmitted, status_code=201)
async def copy_job(job_id: str, request: Request, body: Optional[JobCopy] = None,
                   caller: Caller = Depends(authenticate),
                   idempotency_key: Optional[str] = Header(None)):
    """A new job from this job's config with ``overrides`` (any state of the source)."""
    import asyncio

    ctx = ctx_of(request)
    rec = ctx.owned("jobs", job_id, caller.workspace, "job", HINT)
    body = body or JobCopy()
    source = job_config(ctx.executor.job_dir(job_id), rec)
    config = await asyncio.to_thread(_edited, body.config_yaml, source) if body.config_yaml \
        else dict(source)
    if not body.config_yaml and "name" not in body.overrides:
        config["name"] = f"{source.get('name') or rec['job_name']}-copy"[:256]
    config = apply_overrides(config, body.overrides)
    return await _create(JobCreate(config=config, job_name=body.job_name), request, caller,
                         idempotency_key, extra={"copied_from": job_id})


@router.post("/jobs/{job_id}/stop", response_model=M.JobDetail, status_code=202)
def stop_job(job_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """End a RUNNING job at its next step boundary with a checkpoint; it becomes STOPPED."""
    ctx = ctx_of(request)
    rec = ctx.owned("jobs", job_id, caller.workspace, "job", HINT)
    if rec["status"] == S.PENDING:
        raise ConflictError(f"cannot stop job {job_id}: it is PENDING (it has not started, so "
                            "there is no step to end at)", where=job_id,
                            hint=f"cancel it instead: POST /v1/jobs/{job_id}/cancel")
    S.check_move(job_id, rec["status"], S.STOPPED, "stop")
    now = time.time()
    JobDir(ctx.executor.job_dir(job_id)).request_stop(requested_at=now, key_id=caller.key_id)
    new = ctx.store.update("jobs", job_id, expect_status=[S.RUNNING], stop_requested_at=now)
    if new is None:  # it ended meanwhile: say how
        now_rec = ctx.store.get("jobs", job_id) or rec
        JobDir(ctx.executor.job_dir(job_id)).stop_request.unlink(missing_ok=True)
        raise ConflictError(f"cannot stop job {job_id}: it is {now_rec['status']}",
                            where=job_id, hint="stop works on RUNNING jobs")
    return job_view(ctx, new, detail=True)


@lru_cache(maxsize=1)
def hyperparameter_fields() -> list[dict[str, Any]]:
    """The job's hyper-parameters as form fields: name, type, default, minimum, maximum,
    choices, description, nullable (from the config's own schema, so it never drifts); the
    cloud's hyper-parameters first, then the algorithm knobs."""
    from rltune.config.hyperparams import HyperParameters

    props = HyperParameters.model_json_schema().get("properties", {})
    own = [n for n in HyperParameters.__annotations__ if n in props]  # the cloud's come first
    out = []
    for name in own + [n for n in props if n not in own]:
        prop = props[name]
        options = prop.get("anyOf") or [prop]
        kinds = [o for o in options if o.get("type") != "null"]
        main = kinds[0] if kinds else prop
        choices = main.get("enum")
        if choices is None and len(kinds) > 1 and all("const" in o for o in kinds):
            choices = [o["const"] for o in kinds]
        if choices is None and "const" in main:
            choices = [main["const"]]
        out.append({
            "name": name, "type": "choice" if choices else main.get("type", "string"),
            "default": prop.get("default"), "choices": choices,
            "minimum": main.get("minimum", main.get("exclusiveMinimum")),
            "maximum": main.get("maximum", main.get("exclusiveMaximum")),
            "nullable": len(kinds) < len(options), "description": prop.get("description", ""),
        })
    return out


@router.get("/hyperparameters", response_model=M.HyperParameterFields)
def list_hyperparameters(caller: Caller = Depends(authenticate)) -> dict:
    """Every hyper-parameter a job takes (``training.hyper_parameters``), for forms."""
    return {"items": hyperparameter_fields()}
