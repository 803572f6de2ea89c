"""What a job produced: logs (with follow), metrics series, trajectories, checkpoints, and
the training doctor's alerts."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Literal, Optional

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from rltune.doctor.alerts import read_alerts
from rltune.sdk.errors import NotFoundError
from rltune.server import schemas as M
from rltune.server import states as S
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, page, paging
from rltune.server.jobdata import (
    list_checkpoints,
    metric_series,
    read_log_lines,
    trajectory_steps,
)
from rltune.server.openapi import V1_ERRORS, TypedRoute, media

router = APIRouter(prefix="/v1", tags=["job outputs"], route_class=TypedRoute,
                   responses=V1_ERRORS)
HINT = "list jobs: GET /v1/jobs"
FOLLOW_TICK_S = 0.25


def _job(request: Request, job_id: str, caller: Caller) -> dict:
    return ctx_of(request).owned("jobs", job_id, caller.workspace, "job", HINT)


@router.get("/jobs/{job_id}/logs", response_model=M.JobLogs)
async def job_logs(job_id: str, request: Request,
                   offset: int = Query(1, ge=-100000, le=10**9,
                                       description="1-based line; -N: the last N lines (tail)"),
                   lines: Optional[int] = Query(None, ge=1, le=100000),
                   line: Optional[int] = Query(None, ge=1, le=100000,
                                               description="the cloud SDK's name of 'lines'"),
                   follow: bool = Query(False), wait: float = Query(20.0, ge=0, le=60),
                   source: Literal["train", "process"] = Query("train"),
                   caller: Caller = Depends(authenticate)) -> dict:
    """Log lines from ``offset`` (1-based). ``follow=true`` long-polls for new lines."""
    ctx = ctx_of(request)
    rec = _job(request, job_id, caller)
    count = lines or line or 1000
    job_dir = ctx.executor.job_dir(job_id)
    if offset < 1:  # -N: the tail (the console opens logs this way); 0: only lines to come
        offset = max(1, _complete_lines(job_dir, source) + offset + 1)
    deadline = time.monotonic() + (wait if follow else 0)
    while True:
        out, nxt = read_log_lines(job_dir, offset, count, source)
        rec = ctx.store.get("jobs", job_id) or rec
        finished = rec["status"] in S.TERMINAL
        if out or finished or time.monotonic() >= deadline:
            break
        await asyncio.sleep(FOLLOW_TICK_S)
    return {"job_id": job_id, "logs": out, "offset": offset, "next_offset": nxt,
            "status": rec["status"], "finished": finished}


def _complete_lines(job_dir, source: str) -> int:
    from rltune.server.jobdata import LOG_SOURCES

    path = job_dir / LOG_SOURCES[source]
    if not path.is_file():
        return 0
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


# The cloud SDK's path for a job's log (``GET /fine-tunes/{id}/logs?offset=&line=``).
router.add_api_route("/fine-tunes/{job_id}/logs", job_logs, methods=["GET"],
                     include_in_schema=False)


@router.get("/jobs/{job_id}/logs/stream", **media("text/event-stream", {"type": "string"}))
async def job_log_stream(job_id: str, request: Request, offset: int = Query(1, ge=1, le=10**9),
                         caller: Caller = Depends(authenticate)) -> StreamingResponse:
    """Server-sent events: one ``data:`` per log line; ``event: end`` when the job is over."""
    ctx = ctx_of(request)
    _job(request, job_id, caller)
    job_dir = ctx.executor.job_dir(job_id)

    async def events():
        pos = offset
        while not await request.is_disconnected():
            out, pos = read_log_lines(job_dir, pos, 1000)
            for text in out:
                yield f"data: {json.dumps(text)}\n\n"
            rec = ctx.store.get("jobs", job_id)
            if rec is None or (rec["status"] in S.TERMINAL and not out):
                yield f"event: end\ndata: {json.dumps((rec or {}).get('status'))}\n\n"
                return
            if not out:
                await asyncio.sleep(FOLLOW_TICK_S)

    return StreamingResponse(events(), media_type="text/event-stream")


@router.get("/jobs/{job_id}/metrics", response_model=M.JobMetrics)
def job_metrics(job_id: str, request: Request, names: Optional[str] = Query(None),
                start_step: Optional[int] = Query(None, ge=0, le=10**9),
                end_step: Optional[int] = Query(None, ge=0, le=10**9),
                caller: Caller = Depends(authenticate)) -> dict:
    """Metric series ``{name: [[step, value], ...]}`` (all names, or a comma-separated list)."""
    _job(request, job_id, caller)
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    series = metric_series(ctx_of(request).executor.job_dir(job_id), wanted, start_step,
                           end_step)
    return {"job_id": job_id, "names": sorted(series), "series": series}


@router.get("/jobs/{job_id}/alerts", response_model=M.JobAlerts)
def job_alerts(job_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """The training doctor's alerts (``alerts.jsonl``: step, code, title, evidence, advice)."""
    _job(request, job_id, caller)
    alerts = read_alerts(ctx_of(request).executor.job_dir(job_id))
    return {"job_id": job_id, "alerts": [a.model_dump() for a in alerts]}


@router.get("/jobs/{job_id}/trajectories/steps", response_model=M.TrajectorySteps)
def job_trajectory_steps(job_id: str, request: Request,
                         caller: Caller = Depends(authenticate)) -> dict:
    _job(request, job_id, caller)
    return {"job_id": job_id, "steps": trajectory_steps(ctx_of(request).executor.job_dir(job_id))}


@router.get("/jobs/{job_id}/trajectories", response_model=M.TrajectoryPage)
def job_trajectories(job_id: str, request: Request, step: int = Query(..., ge=0, le=10**9),
                     min_reward: Optional[float] = Query(None),
                     max_reward: Optional[float] = Query(None),
                     status: Optional[str] = Query(None, max_length=32),
                     sample_index: Optional[int] = Query(None, ge=0, le=10**9),
                     rollout_id: Optional[str] = Query(None, max_length=256),
                     page_no: int = Query(1, ge=1, le=10**6),
                     page_size: int = Query(50, ge=1, le=500),
                     q: Optional[str] = Query(None, max_length=200,
                                              description="text the prompt contains"),
                     fields: Optional[Literal["summary"]] = Query(
                         None, description="'summary': no messages/tokens, adds 'prompt'"),
                     caller: Caller = Depends(authenticate)) -> dict:
    """Trajectories of one step, filtered on the server, one page at a time."""
    from rltune.console.trajectories import summary

    _job(request, job_id, caller)
    # An index of the step file: filters and paging touch only the lines a page shows.
    idx = _step_index(request, job_id, step)
    lines = idx.select(min_reward=min_reward, max_reward=max_reward, status=status,
                       sample_index=sample_index, rollout_id=rollout_id, q=q) if idx else []
    off, lim = paging(page_no, page_size)
    items = idx.read(lines[off:off + lim]) if idx else []
    return page([summary(r) for r in items] if fields == "summary" else items, len(lines),
                page_no, page_size, {"job_id": job_id, "step": step})


def _step_index(request: Request, job_id: str, step: int):
    """The cached index of a step's trajectory file, or None when the step has none."""
    from rltune.console.trajectories import step_index
    from rltune.jobdir import JobDir

    path = JobDir(ctx_of(request).executor.job_dir(job_id)).trajectory(step)
    return step_index(path) if path.is_file() else None


@router.get("/jobs/{job_id}/trajectories/{step}/groups", response_model=M.TrajectoryGroups)
def job_groups(job_id: str, step: int, request: Request,
               sample_index: Optional[int] = Query(None, ge=0, le=10**9),
               caller: Caller = Depends(authenticate)) -> dict:
    """The step's groups: the n rollouts of each prompt, with their rewards."""
    _job(request, job_id, caller)
    groups: dict[int, list[dict]] = {}
    index = _step_index(request, job_id, step)
    for r in index.read(index.select(sample_index=sample_index)) if index else []:
        idx = int(r.get("sample_index", -1))
        groups.setdefault(idx, []).append(r)
    return {"job_id": job_id, "step": step, "groups": [
        {"sample_index": k, "rewards": [r.get("reward") for r in v], "trajectories": v}
        for k, v in sorted(groups.items())]}


@router.get("/jobs/{job_id}/trajectories/{step}/{rollout_id}", response_model=M.Trajectory)
def job_trajectory(job_id: str, step: int, rollout_id: str, request: Request,
                   tokens: Optional[Literal["decoded"]] = Query(
                       None, description="'decoded': add tokens[i].text, one string per id"),
                   caller: Caller = Depends(authenticate)) -> dict:
    rec = _job(request, job_id, caller)
    index = _step_index(request, job_id, step)
    found = index.read(index.select(rollout_id=rollout_id)) if index else []
    if not found:
        raise NotFoundError(f"no trajectory {rollout_id!r} at step {step} of {job_id}",
                            where=rollout_id, hint="list them: GET /v1/jobs/{id}/trajectories")
    if tokens == "decoded":  # the console's token view (tokenizers only, no torch)
        from rltune.console.tokens import tokenizer_dir, with_token_text

        return with_token_text(found[0], tokenizer_dir(rec.get("model")))
    return found[0]


@router.get("/jobs/{job_id}/checkpoints", response_model=M.JobCheckpoints)
def job_checkpoints(job_id: str, request: Request,
                    caller: Caller = Depends(authenticate)) -> dict:
    """Saved checkpoints with their validation reward, oldest first."""
    _job(request, job_id, caller)
    return {"job_id": job_id,
            "checkpoints": list_checkpoints(ctx_of(request).executor.job_dir(job_id))}
