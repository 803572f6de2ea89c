"""The OpenAPI document with a typed body for every answer: each operation's success body is a
model of ``rltune.server.schemas`` (or a named non-JSON media type), every error the one error
body. The routes keep returning plain dicts; this table says what they return, and
``tests/server/test_schemathesis.py`` checks the running server against it.

A new route needs a row in ``SUCCESS`` (``test_every_operation_has_a_typed_success_body``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from rltune.server import schemas as M

#: Non-JSON answers: (media type, JSON Schema of the body).
Media = tuple[str, dict[str, Any]]
_BINARY = {"type": "string", "format": "binary"}
_EVENTS = ("text/event-stream", {"type": "string"})

#: (method, path) -> the 2xx body: a model, or a non-JSON media type.
SUCCESS: dict[tuple[str, str], Union[type[BaseModel], Media]] = {
    ("GET", "/health"): M.Health,
    ("GET", "/v1/whoami"): M.WhoAmI,
    ("POST", "/v1/keys"): M.NewKey,
    ("GET", "/v1/keys"): M.KeyList,
    ("DELETE", "/v1/keys/{key_id}"): M.KeyView,
    ("POST", "/v1/files"): M.FileView,
    ("GET", "/v1/files"): M.Page[M.FileView],
    ("GET", "/v1/files/{file_id}"): M.FileView,
    ("DELETE", "/v1/files/{file_id}"): M.FileDeleted,
    ("GET", "/v1/files/{file_id}/content"): ("application/jsonl", _BINARY),
    ("POST", "/v1/functions"): M.FunctionView,
    ("GET", "/v1/functions"): M.Page[M.FunctionView],
    ("GET", "/v1/functions/{entity_id}"): M.FunctionView,
    ("DELETE", "/v1/functions/{entity_id}"): M.FunctionDeleted,
    ("GET", "/v1/functions/{entity_id}/archive"): ("application/zip", _BINARY),
    ("POST", "/v1/functions/{entity_id}/load"): M.InstanceView,
    ("GET", "/v1/instances"): M.Page[M.InstanceView],
    ("GET", "/v1/instances/{instance_id}"): M.InstanceView,
    ("DELETE", "/v1/instances/{instance_id}"): M.InstanceDeleted,
    ("POST", "/v1/instances/{instance_id}/test"): M.InstanceTest,
    ("GET", "/v1/instances/{instance_id}/logs"): M.InstanceLogs,
    ("POST", "/v1/jobs"): M.JobView,
    ("GET", "/v1/jobs"): M.Page[M.JobView],
    ("GET", "/v1/jobs/{job_id}"): M.JobDetail,
    ("DELETE", "/v1/jobs/{job_id}"): M.JobDeleted,
    ("POST", "/v1/jobs/{job_id}/cancel"): M.JobDetail,
    ("POST", "/v1/jobs/{job_id}/resume"): M.JobDetail,
    ("POST", "/v1/jobs/{job_id}/copy"): M.JobView,
    ("POST", "/v1/jobs/{job_id}/stop"): M.JobDetail,
    ("GET", "/v1/hyperparameters"): M.HyperParameterFields,
    ("GET", "/v1/jobs/{job_id}/logs"): M.JobLogs,
    ("GET", "/v1/jobs/{job_id}/logs/stream"): _EVENTS,
    ("GET", "/v1/jobs/{job_id}/metrics"): M.JobMetrics,
    ("GET", "/v1/jobs/{job_id}/alerts"): M.JobAlerts,
    ("GET", "/v1/jobs/{job_id}/trajectories/steps"): M.TrajectorySteps,
    ("GET", "/v1/jobs/{job_id}/trajectories"): M.TrajectoryPage,
    ("GET", "/v1/jobs/{job_id}/trajectories/{step}/groups"): M.TrajectoryGroups,
    ("GET", "/v1/jobs/{job_id}/trajectories/{step}/{rollout_id}"): M.Trajectory,
    ("GET", "/v1/jobs/{job_id}/checkpoints"): M.JobCheckpoints,
    ("POST", "/v1/models"): M.ModelView,
    ("GET", "/v1/models"): M.Page[M.ModelView],
    ("POST", "/v1/jobs/{job_id}/publish"): M.ModelView,
    ("GET", "/v1/models/{name}"): M.ModelDetail,
    ("DELETE", "/v1/models/{name}"): M.ModelDeleted,
    ("GET", "/v1/models/{name}/export"): ("application/gzip", _BINARY),
    ("POST", "/v1/models/{name}/push"): M.ModelPushed,
    ("POST", "/v1/deployments"): M.NewDeployment,
    ("GET", "/v1/deployments"): M.Page[M.DeploymentView],
    ("GET", "/v1/deployments/{dep_id}"): M.DeploymentView,
    ("DELETE", "/v1/deployments/{dep_id}"): M.DeploymentDeleted,
    ("POST", "/v1/deployments/{dep_id}/stop"): M.DeploymentView,
    ("GET", "/v1/deployments/{dep_id}/logs"): M.DeploymentLogs,
    ("POST", "/v1/deployments/{dep_id}/keys"): M.NewDeploymentKey,
    ("DELETE", "/v1/deployments/{dep_id}/keys/{key_id}"): M.DeploymentKeyRevoked,
    ("POST", "/v1/deployments/{dep_id}/chat/completions"): M.ChatCompletion,
    ("POST", "/v1/evaluations"): M.EvaluationView,
    ("GET", "/v1/evaluations"): M.Page[M.EvaluationView],
    ("GET", "/v1/evaluations/{eval_id}"): M.EvaluationDetail,
    ("DELETE", "/v1/evaluations/{eval_id}"): M.EvaluationDeleted,
}

#: Error answers every ``/v1`` operation may give (all with ``ErrorBody``); ``default`` covers
#: the rarer ones (429 caps, 502/503 from a function or a deployment, 500 on a server bug).
ERRORS = {"400": "bad request (not JSON, a bad archive, user code failed)",
          "401": "no valid API key", "404": "no such resource in the workspace",
          "409": "conflict with the resource's state or an Idempotency-Key",
          "413": "body over the server's limit", "422": "invalid input (names the field)"}
_REF = "#/components/schemas/{model}"


def typed_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` with the bodies above (built once, as FastAPI's own is)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = get_openapi(title=app.title, version=app.version, description=app.description,
                           routes=app.routes)
        app.openapi_schema = add_bodies(spec)
        return app.openapi_schema

    return openapi


def add_bodies(spec: dict[str, Any]) -> dict[str, Any]:
    """Put the success and error bodies into ``spec`` (an OpenAPI document of the app)."""
    models = [m for m in SUCCESS.values() if isinstance(m, type)] + [M.ErrorBody]
    keys, defs = models_json_schema([(m, "serialization") for m in dict.fromkeys(models)],
                                    ref_template=_REF)
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(defs.get("$defs", {}))
    error = {"content": {"application/json": {"schema": keys[(M.ErrorBody, "serialization")]}}}
    for path, ops in spec.get("paths", {}).items():
        for method, op in ops.items():
            body = SUCCESS.get((method.upper(), path))
            if body is None:
                continue
            codes = [c for c in op.get("responses", {}) if c.startswith("2")] or ["200"]
            for code in codes:
                answer = op["responses"].setdefault(code, {"description": "OK"})
                if isinstance(body, tuple):
                    answer["content"] = {body[0]: {"schema": body[1]}}
                else:
                    schema = keys[(body, "serialization")]
                    answer["content"] = {"application/json": {"schema": schema}}
            if path.startswith("/v1"):
                for code, text in ERRORS.items():
                    op["responses"][code] = {"description": text, **error}
            op["responses"]["default"] = {"description": "another error", **error}
    return spec
