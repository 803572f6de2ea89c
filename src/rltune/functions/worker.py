"""One function worker process: load a processor, run ``setup()`` once, serve it over HTTP.

Run it as ``python -m rltune.functions.worker`` or ``rltune functions serve``. Configuration
comes from flags or from the cloud's env vars ``FUNC_TYPE``, ``PROCESSOR_CLASS``,
``SERVER_PORT``, ``THREAD_POOL_WORKERS``, ``THREAD_POOL_QUEUE`` (plus rltune's
``RLTUNE_WORKSPACE`` and ``RLTUNE_FUNC_TIMEOUT``). Port 0 binds a free port; with
``--ready-file`` the worker writes ``{"ok": true, "port": …, "pid": …}`` there once it serves
(or ``{"ok": false, "error": …}`` when loading or ``setup()`` failed) — that is how a pool
learns the port (``--ready-file /proc/self/fd/N``: one line on the pipe N). With
``--token-stdin`` the first line of stdin is a secret every request must carry
(``rltune.functions.auth``): a pool's workers answer only that pool.

Example (shell):
    FUNC_TYPE=reward PROCESSOR_CLASS=functions.reward.Calc SERVER_PORT=8000 \\
        python -m rltune.functions.worker --workspace ./my-agent
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.data import FunctionType
from rltune.sdk.errors import RltuneError, UserCodeError

log = logging.getLogger("rltune.functions.worker")
_FD_PREFIX = "/proc/self/fd/"
EXIT_SETUP_FAILED = 3


@dataclass
class WorkerConfig:
    """Everything one worker needs; ``from_env`` reads the cloud's variable names."""

    func_type: str
    classpath: str
    workspace: str = "."
    host: str = "127.0.0.1"
    port: int = 8000
    concurrency: int = 32
    queue_size: int = 100
    timeout: Optional[float] = None
    ready_file: Optional[str] = None
    check_requirements: bool = True
    name: Optional[str] = None  # the function's name in the job (tags its output)
    job_log: Optional[str] = None  # the job's log file: the function's output is appended
    #: Requests must carry it (``rltune.functions.auth``); None: the worker answers anyone.
    token: Optional[str] = None


def install_cloud_alias() -> bool:
    """Make ``import dashscope.finetune.reinforcement…`` and ``import ark_sdk…`` resolve to
    rltune (if available)."""
    try:
        from rltune.reinforcement import install_as_dashscope
    except ImportError:
        log.warning("rltune.reinforcement.install_as_dashscope is unavailable; "
                    "cloud-SDK imports will not resolve")
        return False
    install_as_dashscope()
    from rltune.ark import install_as_ark_sdk

    install_as_ark_sdk()  # Volcano Ark plugins: `import ark_sdk…` resolves to rltune.ark
    return True


def _write_ready(path: Optional[str], payload: dict) -> bool:
    """Write the ready file; False when its folder is gone: the pool that started this worker
    shut down while it started (the job ended), so nobody is waiting for it."""
    if not path:
        return True
    if path.startswith(_FD_PREFIX):  # a pipe from the pool: one line, then closed
        fd = int(path[len(_FD_PREFIX):])
        try:
            os.write(fd, json.dumps(payload).encode() + b"\n")
            os.close(fd)
        except OSError:  # the pool is gone (EPIPE): nobody is waiting for this worker
            return False
        return True
    tmp = f"{path}.tmp"
    try:
        Path(tmp).write_text(json.dumps(payload))
        os.replace(tmp, path)  # atomic: the pool never reads a half-written file
    except FileNotFoundError:
        return False
    return True


async def load_processor(cfg: WorkerConfig):
    """Import, instantiate and set up the processor; raise ``UserCodeError`` with the cause."""
    from rltune.functions.requirements import describe_missing, missing_requirements
    from rltune.sdk.loader import load_processor_class
    from rltune.sdk.processors import call_setup

    workspace = Path(cfg.workspace).resolve()
    missing = missing_requirements(workspace) if cfg.check_requirements else []
    if missing:
        log.warning(describe_missing(workspace, missing))
    note = f"\n{describe_missing(workspace, missing)}" if missing else ""
    try:
        cls = load_processor_class(cfg.classpath, workspace, cfg.func_type)
    except UserCodeError as exc:
        if note:
            raise UserCodeError(exc.message + note, where=exc.where, hint=exc.hint) from exc
        raise
    ftype = FunctionType(cfg.func_type)
    declared = getattr(cls, "func_type", None)
    if declared is not None and FunctionType(declared) != ftype:
        raise UserCodeError(
            f"{cls.__name__} is a {FunctionType(declared).value} processor but the worker "
            f"serves {ftype.value}",
            where=cfg.classpath,
            hint=f"set the function type to {FunctionType(declared).value}",
        )
    try:
        processor = cls()
    except Exception as exc:
        raise UserCodeError(
            f"{cls.__name__}() failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}{note}",
            where=cfg.classpath,
            hint="the processor is built with no arguments; fix its __init__",
        ) from exc
    try:
        await call_setup(processor)
    except Exception as exc:
        raise UserCodeError(
            f"{cls.__name__}.setup() raised {type(exc).__name__}: {exc}\n"
            f"{traceback.format_exc()}{note}",
            where=cfg.classpath,
            hint="fix setup(); it runs once when the worker starts",
        ) from exc
    return processor


async def serve(cfg: WorkerConfig) -> int:
    """Load, set up and serve until SIGINT/SIGTERM. Returns the process exit code."""
    import uvicorn

    from rltune.functions import output
    from rltune.functions.auth import guarded
    from rltune.functions.worker_app import build_app

    output.install(cfg.name or f"{cfg.func_type}:{cfg.classpath}", cfg.job_log)
    install_cloud_alias()
    from rltune.functions.sslshare import share_ssl_contexts

    share_ssl_contexts()  # before the user's code: a client per rollout is then ~0.4 ms, not ~30
    from rltune.observability.tracing import start_worker_tracing

    # Before the user's code loads: its spans (trace_client, observe_tool) need the provider.
    tracing = start_worker_tracing(cfg.func_type)
    workspace = Path(cfg.workspace).resolve()
    os.chdir(workspace)  # like the cloud: code runs with the workspace root as cwd
    try:
        processor = await load_processor(cfg)
    except RltuneError as exc:
        _write_ready(cfg.ready_file, {"ok": False, "error": exc.message, "where": exc.where,
                                      "hint": exc.hint})
        print(f"rltune worker: {exc}", file=sys.__stderr__, flush=True)  # rltune's own, untagged
        return EXIT_SETUP_FAILED
    app = guarded(build_app(processor, cfg.func_type, concurrency=cfg.concurrency,
                            queue_size=cfg.queue_size, timeout=cfg.timeout), cfg.token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((cfg.host, cfg.port))
    sock.listen(2048)
    port = sock.getsockname()[1]
    # httptools parses requests several times faster than h11 when installed ("auto" picks it).
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_keep_alive=75, backlog=2048,
                            http=os.environ.get("RLTUNE_WORKER_HTTP", "auto"))
    server = _closing_server(config, tracing.close if tracing else None)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        task.result()
        return 1
    if not _write_ready(cfg.ready_file, {"ok": True, "port": port, "pid": os.getpid()}):
        print("rltune worker: the pool that started this worker has shut down; exiting",
              file=sys.__stderr__, flush=True)  # a quiet end, no traceback in the job log
        server.should_exit = True
        await task
        return 0
    print(f"rltune worker: {type(processor).__name__} ({cfg.func_type}) serving on "
          f"http://{cfg.host}:{port}/api/v1", file=sys.__stderr__, flush=True)  # untagged
    await task
    return 0


def _closing_server(config: Any, close: Optional[Callable[[], None]]) -> Any:
    """A uvicorn server that calls ``close`` at the end of its shutdown. On SIGTERM uvicorn
    shuts down and then re-raises the signal, so ``atexit`` never runs: the worker's last spans
    are exported here or not at all."""
    import uvicorn

    class ClosingServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            try:
                await super().shutdown(sockets)
            finally:
                if close is not None:
                    close()

    return ClosingServer(config)


def _env_float(name: str) -> Optional[float]:
    value = os.environ.get(name)
    return float(value) if value else None


def parse_args(argv: Optional[list[str]] = None) -> WorkerConfig:
    """Flags override the env vars the cloud function server reads."""
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m rltune.functions.worker",
                                description="Serve one rltune/cloud-SDK processor over HTTP.")
    p.add_argument("--func-type", default=env.get("FUNC_TYPE"),
                   choices=[t.value for t in FunctionType])
    p.add_argument("--processor-class", "--classpath", dest="classpath",
                   default=env.get("PROCESSOR_CLASS"))
    p.add_argument("--workspace", default=env.get("RLTUNE_WORKSPACE", "."))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=int(env.get("SERVER_PORT", "8000")))
    p.add_argument("--concurrency", type=int, default=int(env.get("THREAD_POOL_WORKERS", "32")))
    p.add_argument("--queue-size", type=int, default=int(env.get("THREAD_POOL_QUEUE", "100")))
    p.add_argument("--timeout", type=float, default=_env_float("RLTUNE_FUNC_TIMEOUT"))
    p.add_argument("--ready-file", default=env.get("RLTUNE_READY_FILE"))
    p.add_argument("--name", default=None, help="the function's name (tags its output)")
    p.add_argument("--job-log", default=None, help="append the function's output here")
    p.add_argument("--token-stdin", action="store_true",
                   help="read the secret every request must carry from stdin's first line")
    args = p.parse_args(argv)
    if not args.func_type or not args.classpath:
        p.error("set --func-type and --processor-class (or FUNC_TYPE and PROCESSOR_CLASS)")
    token = None
    if args.token_stdin:
        from rltune.functions.auth import read_token

        try:
            token = read_token()  # before any user code is imported
        except ValueError as exc:
            p.error(str(exc))
    return WorkerConfig(func_type=args.func_type, classpath=args.classpath,
                        workspace=args.workspace, host=args.host, port=args.port,
                        concurrency=args.concurrency, queue_size=args.queue_size,
                        timeout=args.timeout, ready_file=args.ready_file, name=args.name,
                        job_log=args.job_log, token=token)


def main(argv: Optional[list[str]] = None) -> int:
    from rltune.sdk.log_level import configure_logging

    configure_logging()  # RLTUNE_LOG_LEVEL or the cloud's LOG_LEVEL
    cfg = parse_args(argv)
    return _run_loop(serve(cfg))


def _run_loop(coro) -> int:
    """Run on uvloop when installed (faster I/O), else asyncio; RLTUNE_WORKER_LOOP=asyncio
    forces the standard loop."""
    if os.environ.get("RLTUNE_WORKER_LOOP", "auto") != "asyncio" and sys.version_info >= (3, 11):
        try:
            import uvloop

            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(coro)
        except ImportError:
            pass
    return asyncio.run(coro)


if __name__ == "__main__":
    sys.exit(main())
