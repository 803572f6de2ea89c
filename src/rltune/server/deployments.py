"""Deployments: serving processes of published models, started and watched by the job server.

A deployment record (table ``deployments``) names its models, its API keys (sha256 only) and
its state: STARTING → RUNNING → STOPPED (by ``stop`` or the server stopping) or FAILED (the
process died, with the tail of its log). Its process is ``rltune.lifecycle.serveproc`` in
``<server>/deployments/<id>/`` (spec, keys, log, endpoint), in its own process group, and dies
with the server (PDEATHSIG). When the server starts again it starts every deployment that was
not stopped by a user again, with the same keys ("recovered").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

from rltune._process import pid_alive, signal_group, spawn_group, stop_group
from rltune.server.auth import KEY_PREFIX, hash_key

log = logging.getLogger("rltune.server.deployments")
STARTING, RUNNING, STOPPED, FAILED = "STARTING", "RUNNING", "STOPPED", "FAILED"
LIVE = (STARTING, RUNNING)
START_TIMEOUT_S = 300.0


def new_key() -> tuple[str, dict[str, Any]]:
    """(secret, the record kept of it)."""
    secret = KEY_PREFIX + "dep-" + secrets.token_urlsafe(24)
    return secret, {"key_id": f"dkey-{secrets.token_hex(4)}", "sha256": hash_key(secret),
                    "created_at": time.time()}


class DeploymentManager:
    def __init__(self, store: Any, root: Path, *, engine: str = "builtin"):
        self.store = store
        self.root = Path(root)
        self.engine = engine
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self._watchers: set[asyncio.Task] = set()

    def dir_of(self, dep_id: str) -> Path:
        return self.root / dep_id

    # ---- lifecycle of the manager
    async def start(self) -> None:
        """Start again every deployment a user did not stop (the server restarted)."""
        for status in (LIVE, (STOPPED,)):
            recs, _ = self.store.list("deployments", statuses=list(status))
            for rec in recs:
                if rec.get("desired") != "running":
                    continue
                if pid_alive(rec.get("pid")):
                    signal_group(rec["pid"], signal.SIGKILL)
                self.store.update("deployments", rec["id"], status=STARTING,
                                  recovered_at=time.time())
                await self._spawn(self.store.get("deployments", rec["id"]))

    async def stop(self) -> None:
        """The server stops: stop the processes, keep ``desired`` so they come back."""
        for dep_id in list(self.procs):
            await self._kill(dep_id)
            self.store.update("deployments", dep_id, status=STOPPED, base_url=None,
                              error="the server stopped; it starts again with the server")
        for t in list(self._watchers):
            t.cancel()

    # ---- operations
    async def create(self, workspace: str, name: str, models: list[dict[str, Any]],
                     threads: int = 1, engine: Optional[str] = None
                     ) -> tuple[dict[str, Any], str]:
        """Record and start a deployment; returns (record, its first API key's secret).

        ``engine`` (``builtin`` or ``vllm``; the manager's default when None) is the caller's
        to check first (``rltune.engine.select.check_engine_installed``)."""
        dep_id = f"dep-{secrets.token_hex(6)}"
        secret, key = new_key()
        rec = {"id": dep_id, "workspace": workspace, "status": STARTING,
               "created_at": time.time(), "name": name, "engine": engine or self.engine,
               "models": [m["name"] for m in models], "model_paths": models,
               "threads": threads, "keys": [key], "desired": "running", "pid": None,
               "base_url": None, "error": None}
        d = self.dir_of(dep_id)
        d.mkdir(parents=True)
        fd = os.open(d / "internal.key", os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32))
        self.store.put("deployments", rec)
        await self._spawn(rec)
        return self.store.get("deployments", dep_id) or rec, secret

    def internal_key(self, dep_id: str) -> str:
        return (self.dir_of(dep_id) / "internal.key").read_text().strip()

    def add_key(self, rec: dict[str, Any]) -> tuple[dict[str, Any], str]:
        secret, key = new_key()
        keys = [*rec.get("keys", []), key]
        new = self.store.update("deployments", rec["id"], keys=keys) or rec
        self._write_keys(new)
        return key, secret

    def revoke_key(self, rec: dict[str, Any], key_id: str) -> bool:
        keys = [k for k in rec.get("keys", []) if k["key_id"] != key_id]
        if len(keys) == len(rec.get("keys", [])):
            return False
        self._write_keys(self.store.update("deployments", rec["id"], keys=keys) or rec)
        return True

    async def stop_deployment(self, rec: dict[str, Any]) -> dict[str, Any]:
        self.store.update("deployments", rec["id"], desired="stopped")
        await self._kill(rec["id"])
        if rec.get("pid") and pid_alive(rec["pid"]):
            signal_group(rec["pid"], signal.SIGKILL)
        return self.store.update("deployments", rec["id"], status=STOPPED, base_url=None,
                                 stopped_at=time.time()) or rec

    async def delete(self, rec: dict[str, Any]) -> None:
        await self.stop_deployment(rec)
        self.store.delete("deployments", rec["id"])
        shutil.rmtree(self.dir_of(rec["id"]), ignore_errors=True)

    def log_lines(self, dep_id: str, lines: int = 200) -> list[str]:
        path = self.dir_of(dep_id) / "serve.log"
        if not path.is_file():
            return []
        return path.read_text(errors="replace").splitlines()[-lines:]

    # ---- the process
    def _write_keys(self, rec: dict[str, Any]) -> None:
        path = self.dir_of(rec["id"]) / "keys.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"sha256": [k["sha256"] for k in rec.get("keys", [])]}))
        os.replace(tmp, path)

    async def _spawn(self, rec: dict[str, Any]) -> None:
        d = self.dir_of(rec["id"])
        spec = {"engine": rec.get("engine", "builtin"), "host": "127.0.0.1",
                "threads": rec.get("threads", 1), "models": rec["model_paths"]}
        (d / "spec.json").write_text(json.dumps(spec))
        self._write_keys(rec)
        (d / "endpoint.json").unlink(missing_ok=True)
        try:
            proc = await spawn_group([sys.executable, "-m", "rltune.lifecycle.serveproc", str(d)],
                                     log_path=d / "serve.log", cwd=d)
        except Exception as exc:
            self.store.update("deployments", rec["id"], status=FAILED,
                              error=f"could not start the serving process: {exc}")
            return
        self.procs[rec["id"]] = proc
        self.store.update("deployments", rec["id"], pid=proc.pid, status=STARTING, error=None)
        task = asyncio.create_task(self._watch(rec["id"], proc))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _watch(self, dep_id: str, proc: asyncio.subprocess.Process) -> None:
        endpoint = self.dir_of(dep_id) / "endpoint.json"
        deadline = time.monotonic() + START_TIMEOUT_S
        while proc.returncode is None:
            if endpoint.is_file():
                info = json.loads(endpoint.read_text())
                self.store.update("deployments", dep_id, expect_status=[STARTING],
                                  status=RUNNING, base_url=info["base_url"],
                                  started_at=time.time())
                break
            if time.monotonic() > deadline:
                await self._kill(dep_id)
                self.store.update("deployments", dep_id, status=FAILED,
                                  error=f"not serving after {START_TIMEOUT_S:.0f} s")
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 0.2)
        rc = await proc.wait()
        signal_group(proc.pid, signal.SIGKILL)
        killed = self.procs.get(dep_id) is not proc  # _kill took it: stopped on purpose
        if not killed:
            self.procs.pop(dep_id, None)
        rec = self.store.get("deployments", dep_id)
        if not killed and rec and rec["status"] in LIVE:
            tail = "\n".join(self.log_lines(dep_id, 5))
            self.store.update("deployments", dep_id, status=FAILED, base_url=None,
                              error=f"the serving process exited ({rc}): {tail}")

    async def _kill(self, dep_id: str, grace: float = 3.0) -> None:
        proc = self.procs.pop(dep_id, None)
        if proc is None:
            return
        await stop_group(proc, grace)
