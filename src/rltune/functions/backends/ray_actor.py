"""The Ray actor behind one function instance: it runs ``python -m rltune.functions.worker`` on
its node and reports on it.

The actor is created with the instance's resources (``num_cpus``, ``memory``) and a runtime
environment that unpacks the workspace archive as its working directory, so the worker process
it starts runs the same code, the same HTTP app and the same error codes as a local worker. The
worker binds the node's IP address (the pool calls it over HTTP from the driver's node) and gets
SIGKILL when the actor process dies, so killing the actor ends the instance.

This module imports ``ray`` only inside ``actor_class``; the methods run in the actor process.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from rltune._process import die_with_parent, tail_file, tree_rss
from rltune._ray import node_address


class FunctionActor:
    """One function instance: a worker process on this actor's node (an async Ray actor)."""

    def __init__(self) -> None:
        self.proc: Optional[asyncio.subprocess.Process] = None
        self.dir = Path(tempfile.mkdtemp(prefix="rltune-ray-worker-"))
        self.log_path = self.dir / "worker.log"

    async def start(self, args: list[str], start_timeout: float,
                    token: Optional[str] = None) -> dict[str, Any]:
        """Start the worker with ``args`` (after ``-m rltune.functions.worker``); return
        ``{"ok": True, "host", "port", "pid"}`` once it serves, or ``{"ok": False, ...}``.
        With ``token`` the worker answers only requests carrying it (written on its stdin)."""
        import ray

        import rltune

        host = node_address(ray, "a function worker")
        ready = self.dir / "ready.json"
        env = dict(os.environ)  # the runtime_env's env_vars are already in it
        rltune_root = str(Path(rltune.__file__).resolve().parent.parent)  # py_modules or site
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.getcwd(), rltune_root, env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        cmd = [sys.executable, "-m", "rltune.functions.worker", *args, "--workspace",
               os.getcwd(), "--host", host, "--port", "0", "--ready-file", str(ready)]
        if token:
            cmd.append("--token-stdin")
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.PIPE if token else asyncio.subprocess.DEVNULL,
                stdout=log, stderr=log, env=env, preexec_fn=die_with_parent())
        if token and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(f"{token}\n".encode())
                await self.proc.stdin.drain()
            except OSError:
                pass  # it died at once; the loop below reports how
            finally:
                self.proc.stdin.close()
        deadline = time.monotonic() + start_timeout
        while True:
            if ready.exists():
                info = json.loads(ready.read_text())
                if info.get("ok"):
                    return {"ok": True, "host": host, "port": int(info["port"]),
                            "pid": self.proc.pid,
                            "node": ray.get_runtime_context().get_node_id()}
                await self.proc.wait()
                shutil.rmtree(self.dir, ignore_errors=True)
                return {"ok": False, "error": info.get("error", "worker failed to start"),
                        "where": info.get("where"), "hint": info.get("hint")}
            if self.proc.returncode is not None:
                tail = tail_file(self.log_path, 2000)
                shutil.rmtree(self.dir, ignore_errors=True)
                return {"ok": False, "error": f"worker exited during start "
                        f"({self.proc.returncode}):\n{tail}"}
            if time.monotonic() > deadline:
                self.proc.kill()
                return {"ok": False, "error": f"worker did not start within {start_timeout} s",
                        "hint": "make setup() faster or raise start_timeout"}
            await asyncio.sleep(0.05)

    async def wait(self) -> dict[str, Any]:
        """Resolves when the worker exits: its exit code and the end of its output."""
        assert self.proc is not None
        code = await self.proc.wait()
        tail = tail_file(self.log_path, 2000)
        shutil.rmtree(self.dir, ignore_errors=True)
        return {"code": code, "tail": tail}

    async def rss(self) -> int:
        """Resident memory of the worker and its children, bytes (0 once it is gone)."""
        import psutil

        if self.proc is None or self.proc.returncode is not None:
            return 0
        try:
            ps = psutil.Process(self.proc.pid)
            children = ps.children(recursive=True)
        except psutil.Error:
            return 0
        return tree_rss(ps, children)

    async def log_tail(self, n_chars: int = 2000) -> str:
        return tail_file(self.log_path, n_chars)

    async def stop(self, grace: float = 3.0) -> None:
        """SIGTERM the worker, SIGKILL it after ``grace`` seconds, remove its folder."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


_ACTOR_CLASS: Any = None


def actor_class() -> Any:
    """``FunctionActor`` as a Ray actor class (made once per process)."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        import ray

        _ACTOR_CLASS = ray.remote(FunctionActor)
    return _ACTOR_CLASS
