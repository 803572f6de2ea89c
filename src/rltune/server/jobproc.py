"""One job in its own process: ``python -m rltune.server.jobproc <job_dir> [--resume CKPT]``.

The server writes ``<job_dir>/job.yaml`` (the config with file and function ids already
resolved to paths) and ``<job_dir>/job.json`` (``{"job_id": ...}``) and starts this module in a
new process group, so cancel = kill the group (trainer, engine, function workers). It runs the
``Trainer`` with a ``FileSink`` rooted at the job dir and ends by writing
``<job_dir>/result.json``: ``{"status": "SUCCEEDED"|"FAILED"|"INTERRUPTED", "error", "summary"}``.
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


def write_result(job_dir: Path, status: str, error: Optional[str] = None,
                 summary: Optional[dict[str, Any]] = None) -> None:
    tmp = job_dir / "result.json.tmp"
    tmp.write_text(json.dumps({"status": status, "error": error, "summary": summary},
                              default=str))
    os.replace(tmp, job_dir / "result.json")


def read_result(job_dir: Path) -> Optional[dict[str, Any]]:
    try:
        return json.loads((job_dir / "result.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


async def _run(job_dir: Path, resume: Optional[str]) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.functions.output import JOB_LOG_ENV
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import build_sink

    meta = json.loads((job_dir / "job.json").read_text())
    config = load_job_config(job_dir / "job.yaml")
    sink = build_sink(job_dir, config)
    # Function workers append their own output (print, logging) to the job log.
    os.environ[JOB_LOG_ENV] = str(job_dir / "train.log")
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # Cancel the run so TrainingRuntime closes its pools and gateway on the way out.
        loop.add_signal_handler(sig, task.cancel)  # type: ignore[union-attr]
    try:
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
        sink.close()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rltune.server.jobproc")
    parser.add_argument("job_dir", type=Path)
    parser.add_argument("--resume", default=None, help="checkpoint folder to continue from")
    args = parser.parse_args(argv)
    job_dir = args.job_dir.resolve()
    try:
        summary = asyncio.run(_run(job_dir, args.resume))
    except (asyncio.CancelledError, KeyboardInterrupt):
        write_result(job_dir, "INTERRUPTED", "the job process was stopped by a signal")
        return 130
    except Exception as exc:
        from rltune.sdk.errors import RltuneError

        msg = str(exc) if isinstance(exc, RltuneError) else f"{type(exc).__name__}: {exc}"
        write_result(job_dir, "FAILED", msg)
        print(f"job failed: {msg}", file=sys.stderr)
        return 1
    write_result(job_dir, "SUCCEEDED", summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
