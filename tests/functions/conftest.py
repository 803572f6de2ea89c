"""Shared fixtures of the function-runtime tests: the fixture workspace and worker processes."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from rltune.functions.auth import HEADER
from rltune.functions.backends.local import LocalProcessBackend
from rltune.functions.spec import FunctionComponentSpec

HERE = Path(__file__).parent
WS = HERE / "fixtures" / "ws"
WIRE = HERE / "fixtures" / "wire"


def wire(name: str) -> dict:
    return json.loads((WIRE / f"{name}.json").read_text())


def rollout_input(text: str = "hi", **extra) -> dict:
    return {
        "messages": [{"role": "user", "content": text}],
        "model_resource": {"model_name": "m", "base_url": "http://127.0.0.1:9/v1",
                           "api_key": "sk-x"},
        "rollout_extra": extra,
    }


class _WorkerAuth(httpx.Auth):
    """Signs a request with the secret of the worker listening on its port (each worker
    answers only its pool: ``rltune.functions.auth``)."""

    def __init__(self) -> None:
        self.tokens: dict[int, str] = {}

    def auth_flow(self, request):
        token = self.tokens.get(request.url.port)
        if token:
            request.headers[HEADER] = token
        yield request


#: ``httpx.AsyncClient(auth=worker_auth)`` calls workers started by ``start_worker``.
worker_auth = _WorkerAuth()


@pytest.fixture
def start_worker(tmp_path):
    """Factory: start one worker process for (classpath, func_type, **spec fields)."""
    backend = LocalProcessBackend(tmp_path / "logs")
    handles = []

    async def start(classpath: str, func_type: str, **fields):
        fields.setdefault("workspace", WS)
        spec = FunctionComponentSpec(classpath=classpath, func_type=func_type, **fields)
        handle = await backend.start_worker(spec, f"t{len(handles)}")
        handles.append(handle)
        worker_auth.tokens[httpx.URL(handle.base_url).port] = handle.token
        return handle

    yield start
    for h in handles:
        h.kill()
