"""``/v1/evaluations``: models through a job's rollout and reward functions, no training.

``POST /v1/evaluations`` ``{job_id, models: ["base", "<published name>", ...], dataset:
"validation"|"training"|"file-…", n, k, threshold}``: ``base`` is the job's own base model.
``GET /v1/evaluations/{id}`` has the status and, once SUCCEEDED, ``result``: mean@1 and pass@k
per model and every prompt side by side.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from rltune.sdk.errors import ConfigError, NotFoundError
from rltune.server import schemas as M
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, list_page, page_query
from rltune.server.openapi import V1_ERRORS, TypedRoute
from rltune.server.published import find_model

router = APIRouter(prefix="/v1", tags=["evaluations"], route_class=TypedRoute,
                   responses=V1_ERRORS)
HINT = "list evaluations: GET /v1/evaluations"


class EvaluationRequest(BaseModel):
    job_id: str = Field(..., min_length=1, max_length=64,
                        description="the job whose rollout, rewards and datasets are used")
    models: list[str] = Field(["base"], min_length=1, max_length=8,
                              description="'base' (the job's base model) or published names")
    dataset: str = Field("validation", max_length=64,
                         description="validation, training, or an uploaded file id")
    n: int = Field(4, ge=1, le=64, description="samples per prompt")
    k: int = Field(1, ge=1, le=64, description="k of pass@k (at most n)")
    threshold: float = Field(1.0, allow_inf_nan=False,
                             description="a sample passes when its reward >= threshold")


def eval_view(rec: dict[str, Any], result: Any = None) -> dict[str, Any]:
    out = {"evaluation_id": rec["id"], "status": rec["status"], "job_id": rec["job_id"],
           "models": rec["models"], "dataset": rec["dataset"], "n": rec["n"], "k": rec["k"],
           "threshold": rec["threshold"], "created_at": rec["created_at"],
           "finished_at": rec.get("finished_at"), "summary": rec.get("summary"),
           "error": rec.get("error")}
    if result is not None:
        out["result"] = result
    return out


def _dataset_path(ctx: Any, workspace: str, config: Any, which: str) -> str:
    if which in ("validation", "training"):
        found = config.validation_datasets if which == "validation" else config.training_datasets
        if not found:
            raise ConfigError(f"the job has no {which} dataset", where="dataset",
                              hint="use 'training', or an uploaded file id")
        return str(found[0].file_name)
    rec = ctx.store.get("files", which, workspace=workspace)
    if rec is None:
        raise NotFoundError(f"no file {which!r}", where="dataset", hint="list files: GET /v1/files")
    return rec["path"]


@router.post("/evaluations", response_model=M.EvaluationView, status_code=201)
async def create_evaluation(body: EvaluationRequest, request: Request,
                            caller: Caller = Depends(authenticate)) -> dict:
    """Start an evaluation; poll ``GET /v1/evaluations/{id}`` for the result."""
    from rltune.config import load_job_config

    ctx = ctx_of(request)
    ctx.owned("jobs", body.job_id, caller.workspace, "job", "list jobs: GET /v1/jobs")
    if body.k > body.n:
        raise ConfigError(f"k = {body.k} is larger than n = {body.n}", where="k",
                          hint="pass@k needs at least k samples per prompt: raise n")
    job_dir = ctx.executor.job_dir(body.job_id)
    config = load_job_config(job_dir / "job.yaml")
    models = []
    for i, label in enumerate(dict.fromkeys(body.models)):
        if label == "base":
            models.append({"label": "base", "path": config.model.name})
            continue
        rec = find_model(ctx.store, caller.workspace, label)
        if rec is None:
            raise NotFoundError(f"no model {label!r}", where=f"models[{i}]",
                                hint="use 'base' or a published name (GET /v1/models)")
        models.append({"label": label, "path": rec["path"]})
    spec = {"config": str(job_dir / "job.yaml"), "base_dir": str(job_dir),
            "dataset": _dataset_path(ctx, caller.workspace, config, body.dataset),
            "n": body.n, "k": body.k, "threshold": body.threshold, "models": models}
    rec = await request.app.state.evaluations.create(
        caller.workspace, spec, {"job_id": body.job_id, "models": [m["label"] for m in models],
                                 "dataset": body.dataset, "n": body.n, "k": body.k,
                                 "threshold": body.threshold})
    return eval_view(rec)


@router.get("/evaluations", response_model=M.Page[M.EvaluationView])
def list_evaluations(request: Request, page_q: tuple[int, int] = Depends(page_query),
                     caller: Caller = Depends(authenticate)) -> dict:
    return list_page(request, "evaluations", caller.workspace, page_q, eval_view)


@router.get("/evaluations/{eval_id}", response_model=M.EvaluationDetail)
def get_evaluation(eval_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    rec = ctx_of(request).owned("evaluations", eval_id, caller.workspace, "evaluation", HINT)
    runner = request.app.state.evaluations
    return eval_view(rec, runner.result(eval_id)) | {"logs": runner.log_lines(eval_id, 50)}


@router.delete("/evaluations/{eval_id}", response_model=M.EvaluationDeleted)
async def delete_evaluation(eval_id: str, request: Request,
                            caller: Caller = Depends(authenticate)) -> dict:
    rec = ctx_of(request).owned("evaluations", eval_id, caller.workspace, "evaluation", HINT)
    await request.app.state.evaluations.delete(rec)
    return {"evaluation_id": eval_id, "deleted": True}
