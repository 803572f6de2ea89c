"""The job server's FastAPI app: ``create_app(settings)``.

Example (a real server on a free port, as the tests do)::

    from rltune.server.app import create_app
    from rltune.server.settings import ServerSettings
    app = create_app(ServerSettings(home="/tmp/rlt"))   # then: uvicorn.run(app, port=8600)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time

from fastapi import FastAPI, Request

from rltune.functions.registry import FunctionRegistry
from rltune.functions.sandbox import active_isolation, bwrap_problem
from rltune.sdk.errors import AuthError
from rltune.server import schemas as M
from rltune.server import states as S
from rltune.server.audit import AuditLog
from rltune.server.auth import authenticate, bootstrap_admin_key
from rltune.server.bodycap import JsonBodyCap
from rltune.server.context import ServerContext
from rltune.server.errors import error_response, install_error_handlers
from rltune.server.executor import JobExecutor
from rltune.server.instances import InstanceManager
from rltune.server.lifecycle_wiring import attach_lifecycle
from rltune.server.openapi import ANY_ERROR
from rltune.server.settings import ServerSettings
from rltune.server.store import open_store


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """The app; its lifespan opens the store, writes the admin key and runs the executor."""
    from rltune import __version__

    settings = settings or ServerSettings.from_env()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        settings.server_dir.mkdir(parents=True, exist_ok=True)
        settings.jobs_dir.mkdir(parents=True, exist_ok=True)
        private_state(settings)
        store = open_store(settings.db_url)
        private_state(settings)  # the SQLite files just created
        bootstrap_admin_key(store, settings.admin_key_path)
        registry = FunctionRegistry(settings.home)
        if settings.ray_address:
            from rltune.server.cluster import check_cluster

            check_cluster(settings.ray_address)
            log.warning("jobs run their functions as Ray actors on the cluster at %s, without "
                        "a sandbox; %s", settings.ray_address,
                        "several workspaces are served because of --allow-unisolated"
                        if settings.allow_unisolated else "only the 'default' workspace can "
                        "get keys")
        executor = JobExecutor(store, settings.jobs_dir, settings.max_concurrent_jobs,
                               settings.poll_interval, settings.ray_address)
        isolation = active_isolation()
        if isolation == "none":
            log.warning("function code runs WITHOUT a sandbox (%s); %s", bwrap_problem() or
                        "RLTUNE_FUNCTION_ISOLATION=none",
                        "several workspaces are served because of --allow-unisolated: tenants "
                        "can read each other's data" if settings.allow_unisolated else
                        "only the 'default' workspace can get keys")
        ctx = ServerContext(settings, store, registry, executor,
                            InstanceManager(store, registry), isolation)
        app.state.ctx = ctx
        deployments = attach_lifecycle(app, ctx)
        await executor.start()
        await deployments.start()
        try:
            yield
        finally:
            await deployments.stop()
            await executor.stop()
            await ctx.instances.close()
            store.close()
            _forget_server_info(settings)

    app = FastAPI(title="rltune job server", version=__version__, lifespan=lifespan,
                  description="Files, functions and RL fine-tuning jobs. Every /v1 route needs "
                              "'Authorization: Bearer <key>'. See docs/rest-api.md.")
    install_error_handlers(app)
    # inside authentication (added first): a request without a key gets 401, not 413
    app.add_middleware(JsonBodyCap, limit=lambda: settings.max_json_bytes)

    @app.middleware("http")
    async def authenticate_first(request: Request, call_next):
        """Every ``/v1`` route: the key is checked before the body is parsed."""
        if request.url.path.startswith("/v1/") or request.url.path == "/v1":
            try:
                authenticate(request)
            except AuthError as exc:
                return error_response(exc.http_status, exc.code, exc.message, exc.where,
                                      exc.hint)
        return await call_next(request)

    # outside authentication (added after it): it files each call under the caller it found
    app.add_middleware(AuditLog)

    @app.get("/health", tags=["server"], response_model=M.Health, responses=ANY_ERROR,
             response_model_exclude_unset=True)
    def health(request: Request) -> dict:
        """Liveness and queue sizes (no key needed)."""
        store = request.app.state.ctx.store
        _, running = store.list("jobs", statuses=[S.RUNNING], limit=0)
        _, pending = store.list("jobs", statuses=[S.PENDING], limit=0)
        return {"status": "ok", "version": __version__, "pid": os.getpid(),
                "function_isolation": request.app.state.ctx.isolation,
                "function_backend": "ray" if request.app.state.ctx.settings.ray_address
                else "local",
                "jobs_running": running, "jobs_pending": pending, "time": time.time()}

    from rltune.server.routes import (
        audit,
        files,
        functions,
        jobdata,
        jobops,
        jobs,
        keys,
        lifecycle,
    )

    for module in (keys, files, functions, jobs, jobops, jobdata, *lifecycle.MODULES, audit):
        app.include_router(module.router)
    from rltune.console import mount as mount_console

    mount_console(app)  # the web console: GET / and its assets under /console (no key needed)
    return app


log = logging.getLogger("rltune.server")


def private_state(settings: ServerSettings) -> None:
    """The server's folder 0700; the database (and its WAL files) and key files 0600."""
    with contextlib.suppress(OSError):
        os.chmod(settings.server_dir, 0o700)
    for path in settings.server_dir.iterdir():
        if path.is_file() and (path.name.startswith("rltune.db") or path.suffix == ".key"):
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)


def _forget_server_info(settings: ServerSettings) -> None:
    path = settings.server_dir / "server.json"
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def write_server_info(settings: ServerSettings, port: int) -> None:
    """``$RLTUNE_HOME/server/server.json``: how local clients find a running server."""
    info = {"pid": os.getpid(), "host": settings.host, "port": port,
            "url": f"http://{settings.host}:{port}", "started_at": time.time()}
    path = settings.server_dir / "server.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)
