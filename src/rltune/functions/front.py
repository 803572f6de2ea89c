"""One URL for a whole pool: the instance endpoint a loaded function exposes.

``POST /api/v1`` runs ``pool.call`` (so callers get the pool's retries and explicit failures:
a FAILED output is a 200 with ``status: "failed"``), ``GET /health`` returns the pool metrics.
Bad input is a 422 with the reason, like a single worker.

``run_instance`` is what loading a function means: start its pool and serve it; the caller (the
CLI's ``functions load``, the server's ``InstanceManager``) keeps whatever record it needs.

Example (inside a coroutine)::

    async with serve_pool(pool) as url:
        httpx.post(f"{url}/api/v1", json=reward_input)
    async with run_instance(spec) as (pool, url):
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Optional

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from rltune.functions.auth import guarded
from rltune.functions.backends.base import WorkerBackend
from rltune.functions.failures import MEMORY_EXCEEDED, PoolBroken, failed_output
from rltune.functions.pool import FunctionPool
from rltune.functions.spec import FunctionComponentSpec
from rltune.sdk.errors import ValidationError


def build_front_app(pool: FunctionPool) -> FastAPI:
    """The FastAPI app forwarding to ``pool``."""
    app = FastAPI(title="rltune function instance", docs_url=None, redoc_url=None)

    def reply(status: int, payload: object) -> Response:
        return Response(orjson.dumps(payload), status_code=status, media_type="application/json")

    @app.get("/health")
    async def health() -> Response:
        return reply(200, {"status": "healthy", "func_type": pool.spec.func_type.value,
                           **pool.metrics().model_dump(mode="json")})

    @app.post("/api/v1")
    async def invoke(request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return reply(400, {"detail": f"Invalid JSON body: {exc}"})
        headers = {k: v for k, v in request.headers.items() if k in ("traceparent", "tracestate")}
        try:
            out = await pool.call(body, headers=headers)
        except PoolBroken as exc:  # a ConfigError, but not the caller's: a FAILED output
            out = failed_output(pool.spec.func_type, exc.message, code=MEMORY_EXCEEDED)
        except ValidationError as exc:
            return reply(422, {"detail": f"Request parsing error: {exc.message}"})
        return reply(200, out.to_wire())

    return app


@contextlib.asynccontextmanager
async def serve_pool(pool: FunctionPool, host: str = "127.0.0.1", port: int = 0,
                     token: Optional[str] = None) -> AsyncIterator[str]:
    """Serve ``pool`` on ``host:port`` (0 = free port) while the block runs; yield the base URL.
    With ``token`` only requests carrying it in ``X-Rltune-Worker-Token`` are answered."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    server = uvicorn.Server(uvicorn.Config(guarded(build_front_app(pool), token),
                                           log_level="warning", access_log=False,
                                           lifespan="off"))
    # The embedding program owns SIGINT/SIGTERM; uvicorn must not take them over.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if task.done():
            task.result()
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait({task}, timeout=5)
        sock.close()


@contextlib.asynccontextmanager
async def run_instance(spec: FunctionComponentSpec, *, host: str = "127.0.0.1", port: int = 0,
                       backend: Optional[WorkerBackend] = None, token: Optional[str] = None,
                       ) -> AsyncIterator[tuple[FunctionPool, str]]:
    """Start a pool for ``spec`` and serve it while the block runs; yield ``(pool, base_url)``.
    ``token``: as for ``serve_pool`` (the job server's instances answer only the server).

    Raises ``UserCodeError`` when the workers cannot start; on exit the endpoint and every
    worker are stopped.
    """
    async with await FunctionPool.start(spec, backend) as pool, \
            serve_pool(pool, host=host, port=port, token=token) as url:
        yield pool, url
