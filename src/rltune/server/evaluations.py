"""Evaluation runs: ``rltune.lifecycle.evaluate`` processes started and watched by the server.

A record (table ``evaluations``) is RUNNING while its process runs, then SUCCEEDED (with
``result.json`` in ``<server>/evaluations/<id>/``) or FAILED (with the error). Processes die
with the server; at start, runs left RUNNING are marked FAILED.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

from rltune._process import signal_group, spawn_group

RUNNING, SUCCEEDED, FAILED = "RUNNING", "SUCCEEDED", "FAILED"


class EvaluationRunner:
    def __init__(self, store: Any, root: Path):
        self.store = store
        self.root = Path(root)
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self._tasks: set[asyncio.Task] = set()

    def dir_of(self, eval_id: str) -> Path:
        return self.root / eval_id

    async def start(self) -> None:
        left, _ = self.store.list("evaluations", statuses=[RUNNING])
        for rec in left:
            self.store.update("evaluations", rec["id"], status=FAILED, finished_at=time.time(),
                              error="the server stopped while the evaluation ran; start it "
                                    "again")

    async def stop(self) -> None:
        for eval_id, proc in list(self.procs.items()):
            signal_group(proc.pid, signal.SIGKILL)
            self.store.update("evaluations", eval_id, status=FAILED, finished_at=time.time(),
                              error="the server stopped while the evaluation ran")
        for t in list(self._tasks):
            t.cancel()

    async def create(self, workspace: str, spec: dict[str, Any],
                     facts: dict[str, Any]) -> dict[str, Any]:
        eval_id = f"ev-{secrets.token_hex(6)}"
        d = self.dir_of(eval_id)
        d.mkdir(parents=True)
        (d / "spec.json").write_text(json.dumps(spec))
        rec = {"id": eval_id, "workspace": workspace, "status": RUNNING,
               "created_at": time.time(), **facts}
        self.store.put("evaluations", rec)
        proc = await spawn_group([sys.executable, "-m", "rltune.lifecycle.evaluate", str(d)],
                                 log_path=d / "process.log", cwd=d)
        self.procs[eval_id] = proc
        task = asyncio.create_task(self._watch(eval_id, proc))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return rec

    async def _watch(self, eval_id: str, proc: asyncio.subprocess.Process) -> None:
        rc = await proc.wait()
        signal_group(proc.pid, signal.SIGKILL)
        self.procs.pop(eval_id, None)
        status = self._status_file(eval_id)
        if rc == 0 and status.get("status") == SUCCEEDED:
            self.store.update("evaluations", eval_id, expect_status=[RUNNING], status=SUCCEEDED,
                              finished_at=time.time(), summary=self._summary(eval_id))
        else:
            self.store.update("evaluations", eval_id, expect_status=[RUNNING], status=FAILED,
                              finished_at=time.time(),
                              error=status.get("error") or f"exit code {rc}")

    def _status_file(self, eval_id: str) -> dict[str, Any]:
        try:
            return json.loads((self.dir_of(eval_id) / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def result(self, eval_id: str) -> Optional[dict[str, Any]]:
        try:
            return json.loads((self.dir_of(eval_id) / "result.json").read_text())
        except (OSError, ValueError):
            return None

    def _summary(self, eval_id: str) -> dict[str, Any]:
        res = self.result(eval_id) or {}
        return {m["model"]: {"mean@1": m["mean@1"], "pass@k": m["pass@k"]}
                for m in res.get("models", [])}

    def log_lines(self, eval_id: str, lines: int = 200) -> list[str]:
        path = self.dir_of(eval_id) / "eval.log"
        return path.read_text(errors="replace").splitlines()[-lines:] if path.is_file() else []

    async def delete(self, rec: dict[str, Any]) -> None:
        proc = self.procs.pop(rec["id"], None)
        if proc is not None:
            signal_group(proc.pid, signal.SIGKILL)
        self.store.delete("evaluations", rec["id"])
        shutil.rmtree(self.dir_of(rec["id"]), ignore_errors=True)
