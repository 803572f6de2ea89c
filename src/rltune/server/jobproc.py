"""One job in its own process:
``python -m rltune.server.jobproc <job_dir> [--resume CKPT] [--ray-address ADDR]``.

The server writes ``<job_dir>/job.yaml`` (the config with file and function ids already
resolved to paths) and ``<job_dir>/job.json`` (``{"job_id": ...}``) and starts this module in a
new process group, so cancel = kill the group (trainer, engine, function workers). It runs the
``Trainer`` with a ``FileSink`` rooted at the job dir and ends by writing
``<job_dir>/result.json``: ``{"status": "SUCCEEDED"|"STOPPED"|"FAILED"|"INTERRUPTED",
"error", "summary"}`` (STOPPED: it ended early at a step boundary because ``stop`` asked).
``--ray-address`` is the server's cluster: the job's functions run there as Ray actors unless
its config chose otherwise (``rltune.server.cluster.place_functions``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

from rltune.jobdir import JobDir


def write_result(job_dir: Path, status: str, error: Optional[str] = None,
                 summary: Optional[dict[str, Any]] = None) -> None:
    path = JobDir(job_dir).result
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"status": status, "error": error, "summary": summary},
                              default=str))
    os.replace(tmp, path)


def read_result(job_dir: Path) -> Optional[dict[str, Any]]:
    try:
        return json.loads(JobDir(job_dir).result.read_text())
    except (OSError, json.JSONDecodeError):
        return None


async def _run(job_dir: Path, resume: Optional[str],
               ray_address: Optional[str] = None) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.functions.output import JOB_LOG_ENV
    from rltune.server.cluster import join_cluster
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import build_sink

    files = JobDir(job_dir)
    meta = json.loads(files.job_meta.read_text())
    config = load_job_config(files.job_yaml)
    sink = build_sink(job_dir, config)
    # Function workers append their own output (print, logging) to the job log.
    os.environ[JOB_LOG_ENV] = str(files.log)
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    leave = None
    stopping: list[int] = []
    try:
        config = _placed(config, ray_address, sink)
        # Join the Ray cluster before the handlers below: ray.init sets a SIGTERM handler
        # (sys.exit) that would skip the orderly stop; the trainer reuses this connection.
        leave = join_cluster(config.function_backend)
        for sig in (signal.SIGTERM, signal.SIGINT):
            # Cancel the run so TrainingRuntime closes its pools and gateway on the way out.
            loop.add_signal_handler(sig, _cancel_once, task, stopping)
        trainer = Trainer(config, job_dir=job_dir, job_id=meta["job_id"], base_dir=job_dir,
                          sink=sink)
        sink.log(f"job process {os.getpid()} started"
                 + (f", resuming from {resume}" if resume else ""))
        return await trainer.run(resume_from=resume)
    except Exception as exc:
        sink.log(f"job failed: {exc}", level="ERROR")
        sink.log(traceback.format_exc(), level="ERROR")
        raise
    finally:
        if leave is not None:
            leave()
        sink.close()


def _cancel_once(task: Any, stopping: list[int]) -> None:
    """Cancel the run once: a repeated signal must not interrupt the closing (the policy
    gateway's uvicorn, which sees the SIGTERM too, raises it again when it stops)."""
    if not stopping:
        stopping.append(1)
        task.cancel()


def _placed(config: Any, ray_address: Optional[str], sink: Any) -> Any:
    """The config with the function backend this server gives it (and a log line saying so)."""
    from rltune.server.cluster import place_functions

    backend = place_functions(config.function_backend, ray_address)
    if backend is not None and backend.type == "ray":
        on_ray = (config.hyper_parameters.nnodes_training is not None
                  and config.hyper_parameters.trainer_ranks > 1)
        sink.log(f"functions run as Ray actors on the cluster at {backend.address}; "
                 + ("the trainer ranks too, the engine in this process" if on_ray else
                    "the trainer and engine run in this process"))
    return config.model_copy(update={"function_backend": backend})


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rltune.server.jobproc")
    parser.add_argument("job_dir", type=Path)
    parser.add_argument("--resume", default=None, help="checkpoint folder to continue from")
    parser.add_argument("--ray-address", default=None,
                        help="the server's Ray cluster (for jobs that did not choose a backend)")
    args = parser.parse_args(argv)
    job_dir = args.job_dir.resolve()
    try:
        summary = asyncio.run(_run(job_dir, args.resume, args.ray_address))
    except (asyncio.CancelledError, KeyboardInterrupt):
        write_result(job_dir, "INTERRUPTED", "the job process was stopped by a signal")
        return 130
    except Exception as exc:
        from rltune.sdk.errors import RltuneError

        msg = str(exc) if isinstance(exc, RltuneError) else f"{type(exc).__name__}: {exc}"
        write_result(job_dir, "FAILED", msg)
        print(f"job failed: {msg}", file=sys.stderr)
        return 1
    stopped = bool((summary or {}).get("stopped_by_request"))
    write_result(job_dir, "STOPPED" if stopped else "SUCCEEDED", summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
