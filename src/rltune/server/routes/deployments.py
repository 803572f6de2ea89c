"""``/v1/deployments``: serve published models behind an OpenAI-compatible endpoint.

``POST /v1/deployments`` ``{models: [name, ...], name, engine}`` starts one serving process for
all the models (requests are routed by their ``model`` field) and answers with the deployment
and its first API key (shown once). ``engine`` is ``builtin`` (default) or ``vllm``; an engine
this installation cannot start is refused here, by name, before anything is recorded. The
endpoint is ``base_url`` once ``status`` is RUNNING.
``POST /v1/deployments/{id}/chat/completions`` forwards a chat from a workspace key (the
console's playground) so the browser never holds a deployment key.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

import httpx
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from rltune.engine.select import ENGINE_NAMES, check_engine_installed
from rltune.lifecycle.publish import NAME_PATTERN
from rltune.sdk.errors import (
    ConfigError,
    ConflictError,
    NotFoundError,
    OverloadedError,
    RltuneError,
)
from rltune.server import schemas as M
from rltune.server.auth import Caller, authenticate
from rltune.server.context import ctx_of, list_page, page_query
from rltune.server.deployments import LIVE, RUNNING, DeploymentManager
from rltune.server.openapi import V1_ERRORS, TypedRoute
from rltune.server.published import get_model

router = APIRouter(prefix="/v1", tags=["deployments"], route_class=TypedRoute,
                   responses=V1_ERRORS)


class TooManyError(RltuneError):
    """A cap on live resources is reached."""

    http_status = 429
    code = "too_many"


HINT = "list deployments: GET /v1/deployments"


def dep_view(rec: dict[str, Any]) -> dict[str, Any]:
    return {"deployment_id": rec["id"], "name": rec.get("name"), "status": rec["status"],
            "models": rec["models"], "engine": rec.get("engine"), "base_url": rec.get("base_url"),
            "keys": [{"key_id": k["key_id"], "created_at": k["created_at"]}
                     for k in rec.get("keys", [])],
            "created_at": rec["created_at"], "started_at": rec.get("started_at"),
            "stopped_at": rec.get("stopped_at"), "error": rec.get("error")}


def _mgr(request: Request) -> DeploymentManager:
    return request.app.state.deployments


def _owned(request: Request, dep_id: str, caller: Caller) -> dict[str, Any]:
    return ctx_of(request).owned("deployments", dep_id, caller.workspace, "deployment", HINT)


class DeployRequest(BaseModel):
    models: list[str] = Field(..., min_length=1, max_length=16,
                              description="published model names, served on one endpoint")
    name: str = Field("", max_length=128)
    threads: Optional[int] = Field(None, ge=1, le=64, description="torch threads of the "
                                   "built-in engine's serving process (default 1)")
    engine: Literal[ENGINE_NAMES] = Field(  # type: ignore[valid-type]
        "builtin", description="inference engine: builtin, or vllm where vLLM is installed "
        "(one model per deployment)")

    def check_engine(self) -> None:
        """Refuse, naming the key, what the chosen engine cannot do on this installation."""
        check_engine_installed(self.engine)
        if self.engine == "vllm" and len(set(self.models)) > 1:
            raise ConfigError("engine: vllm serves one model per deployment (one vLLM engine "
                              f"per process); got {len(set(self.models))} models",
                              where="models", hint="start one deployment per model")
        if self.engine == "vllm" and self.threads is not None:
            raise ConfigError("threads sets the built-in engine's torch threads; vLLM's CPU "
                              "backend takes OMP_NUM_THREADS from the server's environment",
                              where="threads", hint="leave threads out with engine: vllm")


@router.post("/deployments", response_model=M.NewDeployment, status_code=201)
async def create_deployment(body: DeployRequest, request: Request,
                            caller: Caller = Depends(authenticate)) -> dict:
    """Start serving published models; the answer carries ``api_key`` (shown once)."""
    import re

    body.check_engine()
    check_deployment_caps(request, caller.workspace)  # no await between it and the record
    store = ctx_of(request).store
    models = []
    for i, name in enumerate(dict.fromkeys(body.models)):
        if not re.match(NAME_PATTERN, name):
            raise NotFoundError(f"no model {name!r}", where=f"models[{i}]",
                                hint="list models: GET /v1/models")
        rec = get_model(store, caller.workspace, name)
        models.append({"name": name, "path": rec["path"]})
    rec, secret = await _mgr(request).create(caller.workspace, body.name or models[0]["name"],
                                             models, body.threads or 1, engine=body.engine)
    return dep_view(rec) | {"api_key": secret}


def check_deployment_caps(request: Request, workspace: str) -> None:
    """429 when the workspace or the server already has its cap of live deployments
    (``--max-deployments-per-workspace``, ``--max-deployments``): each is a serving process."""
    ctx = ctx_of(request)
    _, live = ctx.store.list("deployments", statuses=list(LIVE), limit=0)
    _, mine = ctx.store.list("deployments", workspace=workspace, statuses=list(LIVE), limit=0)
    for count, cap, scope, flag in (
            (mine, ctx.settings.max_deployments_per_workspace, f"workspace {workspace!r}",
             "--max-deployments-per-workspace"),
            (live, ctx.settings.max_deployments, "this server", "--max-deployments")):
        if count >= cap:
            raise TooManyError(
                f"{scope} has {count} live deployments; the limit is {cap}", where="models",
                hint="stop one first (POST /v1/deployments/{id}/stop) or serve several models "
                f"on one deployment; the operator sets the limit with {flag}")


@router.get("/deployments", response_model=M.Page[M.DeploymentView])
def list_deployments(request: Request, page_q: tuple[int, int] = Depends(page_query),
                     caller: Caller = Depends(authenticate)) -> dict:
    return list_page(request, "deployments", caller.workspace, page_q, dep_view)


@router.get("/deployments/{dep_id}", response_model=M.DeploymentView)
def get_deployment(dep_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    return dep_view(_owned(request, dep_id, caller))


@router.post("/deployments/{dep_id}/stop", response_model=M.DeploymentView)
async def stop_deployment(dep_id: str, request: Request,
                          caller: Caller = Depends(authenticate)) -> dict:
    return dep_view(await _mgr(request).stop_deployment(_owned(request, dep_id, caller)))


@router.delete("/deployments/{dep_id}", response_model=M.DeploymentDeleted)
async def delete_deployment(dep_id: str, request: Request,
                            caller: Caller = Depends(authenticate)) -> dict:
    await _mgr(request).delete(_owned(request, dep_id, caller))
    return {"deployment_id": dep_id, "deleted": True}


@router.get("/deployments/{dep_id}/logs", response_model=M.DeploymentLogs)
def deployment_logs(dep_id: str, request: Request, lines: int = Query(200, ge=1, le=10000),
                    caller: Caller = Depends(authenticate)) -> dict:
    _owned(request, dep_id, caller)
    return {"deployment_id": dep_id, "logs": _mgr(request).log_lines(dep_id, lines)}


@router.post("/deployments/{dep_id}/keys", response_model=M.NewDeploymentKey, status_code=201)
def add_key(dep_id: str, request: Request, caller: Caller = Depends(authenticate)) -> dict:
    """Another API key for the deployment (the secret is shown once)."""
    key, secret = _mgr(request).add_key(_owned(request, dep_id, caller))
    return {"key_id": key["key_id"], "created_at": key["created_at"], "api_key": secret}


@router.delete("/deployments/{dep_id}/keys/{key_id}", response_model=M.DeploymentKeyRevoked)
def revoke_key(dep_id: str, key_id: str, request: Request,
               caller: Caller = Depends(authenticate)) -> dict:
    if not _mgr(request).revoke_key(_owned(request, dep_id, caller), key_id):
        raise NotFoundError(f"no key {key_id!r}", where=key_id,
                            hint=f"list them: GET /v1/deployments/{dep_id}")
    return {"key_id": key_id, "revoked": True}


@router.post("/deployments/{dep_id}/chat/completions", response_model=M.ChatCompletion)
async def playground_chat(dep_id: str, request: Request,
                          caller: Caller = Depends(authenticate)) -> Any:
    """Forward an OpenAI chat request to the deployment (the console's playground)."""
    rec = _owned(request, dep_id, caller)
    if rec["status"] != RUNNING or not rec.get("base_url"):
        raise ConflictError(f"deployment {dep_id} is {rec['status']}", where=dep_id,
                            hint="wait until it is RUNNING" if rec["status"] in LIVE
                            else "start a new deployment")
    body = await request.body()
    headers = {"Authorization": f"Bearer {_mgr(request).internal_key(dep_id)}",
               "Content-Type": "application/json"}
    client = httpx.AsyncClient(timeout=300)
    req = client.build_request("POST", rec["base_url"] + "/chat/completions", content=body,
                               headers=headers)
    try:
        resp = await client.send(req, stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise OverloadedError(f"deployment {dep_id} does not answer: {exc}", where=dep_id,
                              hint=f"see its log: GET /v1/deployments/{dep_id}/logs") from None
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        async def relay():
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
            finally:
                await resp.aclose()
                await client.aclose()
        return StreamingResponse(relay(), media_type="text/event-stream")
    data = await resp.aread()
    await resp.aclose()
    await client.aclose()
    return JSONResponse(content=json.loads(data or b"{}"),
                        status_code=resp.status_code)
