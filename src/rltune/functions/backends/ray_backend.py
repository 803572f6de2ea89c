"""Workers as Ray actors, on any node of a Ray cluster (``function_backend: ray``).

Each function instance is one ``FunctionActor`` (``rltune.functions.backends.ray_actor``)
created with the component's runtime knobs:

- ``cpu`` → the actor's ``num_cpus`` (and the worker's thread variables, as locally);
- ``memory_size`` → the actor's ``memory`` (MB → bytes, a Ray scheduling reservation) and, as
  locally, the RSS limit past which the pool kills and replaces the instance;
- ``env`` → the runtime environment's ``env_vars``;
- ``concurrency``, ``capacity``, ``min_capacity``/``max_capacity``, the scaling thresholds and
  ``timeout`` → the pool and the worker, exactly as with the local backend.

The workspace archive (``rltune.functions.archive``: the cloud's exclusions and .gitignore
applied) is the actor's ``working_dir`` and rltune itself is shipped as a ``py_modules`` entry,
so a node needs only Python and rltune's dependencies. The pool talks HTTP to each worker at
the node's IP address, so FAILED, crashed and timed-out calls carry the local error codes.

The cluster comes from ``address`` or ``RAY_ADDRESS``; one connection (``rltune._ray``) is
shared by every backend of the process and closed when the last one closes. Workers run
without the local bubblewrap sandbox: the cluster's nodes are their isolation.
"""

from __future__ import annotations

import asyncio
import logging
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from rltune._process import describe_exit
from rltune._ray import (
    alive_node_addresses,
    connect,
    cross_host_address,
    disconnect,
    import_ray,
    package_env,
    still_uploaded,
    upload,
)
from rltune.functions.auth import new_token
from rltune.functions.backends.base import WorkerBackend, WorkerHandle
from rltune.functions.spec import FunctionComponentSpec
from rltune.sdk.errors import ConfigError, UserCodeError

log = logging.getLogger("rltune.functions.ray")
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "RAYON_NUM_THREADS")


def gateway_host(config: Any) -> str:
    """Where the policy gateway binds for a job whose functions run on Ray: the job's
    ``function_backend.gateway_host``, else this machine's address in the cluster (the one Ray
    itself gives other nodes for this process), so rollouts on any node reach it. Connects."""
    if config.gateway_host:
        return config.gateway_host
    ray = connect(config.address)
    try:
        return cross_host_address(ray.util.get_node_ip_address(), alive_node_addresses(ray),
                                  what="the policy gateway", where="function_backend.gateway_host")
    finally:
        disconnect()


class RayActorHandle(WorkerHandle):
    """One instance: its Ray actor and the worker's URL on the actor's node."""

    #: Seconds the pool waits for Ray to report an actor's death after its socket dropped.
    death_notice_s = 5.0

    def __init__(self, worker_id: str, actor: Any, info: dict[str, Any],
                 token: Optional[str] = None):
        self.ray = import_ray()
        self.worker_id = worker_id
        self.token = token
        self.actor = actor
        self.pid = info["pid"]  # on the actor's node
        self.node = info["node"]  # the Ray node id
        self.base_url = f"http://{info['host']}:{info['port']}"
        self.done = actor.wait.remote()  # resolves when the worker exits or the actor dies
        self._rss = 0
        self._rss_ref: Any = None
        self._exit: Optional[dict[str, Any]] = None

    def _result(self) -> Optional[dict[str, Any]]:
        """The worker's exit (``{"code", "tail"}``, or ``{"actor_died": why}``); None if up.
        Known once, kept; after ``ray.shutdown`` no Ray call is made (one would start a new
        local Ray and write ``~/.ray``, which breaks a later ``ray start``)."""
        if self._exit is not None:
            return self._exit
        if not self.ray.is_initialized():
            self._exit = {"actor_died": "this process's Ray connection is closed"}
            return self._exit
        ready, _ = self.ray.wait([self.done], timeout=0)
        if not ready:
            return None
        try:
            self._exit = self.ray.get(self.done, timeout=0)
        except self.ray.exceptions.RayActorError as exc:
            why = str(exc).strip().splitlines()
            self._exit = {"actor_died": why[0] if why else type(exc).__name__}
        except Exception as exc:  # a lost object is an exit too
            self._exit = {"actor_died": f"{type(exc).__name__}: {exc}"}
        return self._exit

    def is_alive(self) -> bool:
        return self._result() is None

    def exit_description(self) -> str:
        res = self._result()
        if res is None:
            return "still running"
        if "actor_died" in res:
            return f"lost its Ray actor on node {self.node[:12]} ({res['actor_died']})"
        return describe_exit(res["code"])

    def rss_bytes(self) -> int:
        # Non-blocking: return the last reading and ask for the next one.
        if self._rss_ref is not None:
            ready, _ = self.ray.wait([self._rss_ref], timeout=0)
            if not ready:
                return self._rss
            try:
                self._rss = int(self.ray.get(self._rss_ref, timeout=0))
            except Exception:  # the actor is gone: the reaper sees it
                self._rss = 0
        if self.is_alive():
            self._rss_ref = self.actor.rss.remote()
        return self._rss

    def log_tail(self, n_chars: int = 2000) -> str:
        res = self._result()
        return (res or {}).get("tail", "")[-n_chars:]

    def kill(self) -> None:
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:  # already gone
            pass

    async def stop(self, grace: float = 3.0) -> None:
        try:
            await asyncio.wait_for(asyncio.wrap_future(self.actor.stop.remote(grace).future()),
                                   grace + 2.0)
        except Exception:  # dead or stuck: the kill below ends it either way
            pass
        self.kill()


class RayBackend(WorkerBackend):
    """Start each worker as a Ray actor on the cluster at ``address`` (else ``RAY_ADDRESS``).

    ``ship_rltune`` sends this process's rltune package with every actor (``py_modules``), so
    the cluster runs the driver's version; turn it off when the nodes have rltune installed.
    """

    def __init__(self, address: Optional[str] = None, *, ship_rltune: bool = True):
        self.address = address
        self.ship_rltune = ship_rltune
        self._ray: Any = None
        self._tmp: Optional[Path] = None  # made on first use, removed on close
        self._archives: dict[Path, Path] = {}
        self._uris: dict[str, dict[str, Any]] = {}
        self._actors: list[Any] = []

    @property
    def _dir(self) -> Path:
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="rltune-ray-"))
        return self._tmp

    def _connect(self) -> Any:
        if self._ray is None:
            self._ray = connect(self.address)
        return self._ray

    def fit_runtime(self, runtime: Any, name: str) -> Any:
        """Cap the capacities at what the cluster's CPUs can hold (``cpu`` each)."""
        ray = self._connect()
        total = ray.cluster_resources().get("CPU", 0.0)
        limit = max(1, int(total // (runtime.cpu or 1.0)))
        if runtime.max_capacity <= limit:
            return runtime
        log.warning("%s: runtime asks for max_capacity %s but the Ray cluster has %s CPU(s) "
                    "for actors of cpu %s; capped at %d", name, runtime.max_capacity, total,
                    runtime.cpu, limit)
        return runtime.model_copy(update={k: min(getattr(runtime, k), limit)
                                          for k in ("capacity", "min_capacity", "max_capacity")})

    def _archive(self, workspace: Path) -> Path:
        """The workspace zipped once per backend (the cloud's exclusions, .gitignore)."""
        if workspace not in self._archives:
            from rltune.functions.archive import zip_workspace

            dest = self._dir / f"ws{len(self._archives)}.zip"
            self._archives[workspace] = zip_workspace(workspace, dest).path
        return self._archives[workspace]

    def _uploaded(self, key: str, local: dict[str, Any]) -> dict[str, Any]:
        """``local`` (a runtime_env part naming local paths) uploaded to the cluster once
        (again if the cluster dropped it): ``rltune._ray.upload``."""
        cached = self._uris.get(key)
        if cached is None or not still_uploaded(cached):
            self._uris[key] = cached = upload(local, str(self._dir))
        return cached

    def runtime_env(self, spec: FunctionComponentSpec) -> dict[str, Any]:
        """The actor's Ray runtime environment: workspace, rltune and the worker's env vars."""
        runtime = spec.resolved_runtime()
        threads = str(max(1, math.ceil(runtime.cpu or 1)))
        from rltune.functions.sandbox import passed_env

        # As for local workers, minus the job folder's trace dir: it is not on other nodes.
        env = {k: v for k, v in passed_env().items() if k != "RLTUNE_TRACE_DIR"}
        env.update(dict.fromkeys(_THREAD_VARS, threads))
        env.update(TOKENIZERS_PARALLELISM="false", RLTUNE_WORKER_CPU=threads)
        env.update(runtime.env_strings())
        workspace = Path(spec.workspace)
        out: dict[str, Any] = {
            **self._uploaded(f"ws:{workspace}", {"working_dir": str(self._archive(workspace))}),
            "env_vars": env,
        }
        if self.ship_rltune:
            out.update(self._uploaded("rltune", package_env()))
        return out

    def _refuse(self, spec: FunctionComponentSpec) -> None:
        if spec.python:
            raise ConfigError(
                f"{spec.display_name}: a worker interpreter ({spec.python}) cannot be used on "
                "Ray: actors run the cluster's Python",
                where="python", hint="install the function's requirements on the cluster nodes",
            )
        if spec.build_venv is True or (spec.build_venv == "auto" and _missing(spec)):
            raise ConfigError(
                f"{spec.display_name}: requirements.txt lists packages this environment lacks, "
                "and the Ray backend does not build per-function environments",
                where=f"{spec.workspace}/requirements.txt",
                hint="install them on every node of the cluster (and here), or use "
                     "function_backend: local",
            )

    async def start_worker(self, spec: FunctionComponentSpec, worker_id: str) -> WorkerHandle:
        from rltune.functions.backends.ray_actor import actor_class
        from rltune.functions.output import worker_args

        ray = self._connect()
        self._refuse(spec)
        runtime = spec.resolved_runtime()
        actor = actor_class().options(
            name=None, num_cpus=runtime.cpu, memory=runtime.memory_size * 2**20,
            max_restarts=0, runtime_env=self.runtime_env(spec),
        ).remote()
        self._actors.append(actor)
        args = ["--func-type", spec.func_type.value, "--classpath", spec.classpath,
                "--concurrency", str(runtime.concurrency), "--queue-size", str(spec.queue_size),
                *worker_args(spec.display_name)[:2]]  # --name; the job log is not on the node
        if spec.timeout:
            args += ["--timeout", str(spec.timeout)]
        t0 = time.monotonic()
        token = new_token()
        try:
            # The first call also waits for the actor's placement and runtime environment.
            info = await asyncio.wait_for(
                asyncio.wrap_future(actor.start.remote(args, spec.start_timeout,
                                                       token).future()),
                spec.start_timeout)
        except asyncio.TimeoutError:
            ray.kill(actor, no_restart=True)
            free = ray.available_resources().get("CPU", 0.0)
            raise UserCodeError(
                f"worker {worker_id} did not start on Ray within {spec.start_timeout} s "
                f"(the cluster has {free} CPU(s) free; the actor asks for cpu {runtime.cpu} "
                f"and memory {runtime.memory_size} MB)",
                where=spec.display_name,
                hint="add nodes, lower runtime.cpu / memory_size / max_capacity, or raise "
                     "start_timeout",
            ) from None
        except ray.exceptions.RayError as exc:
            ray.kill(actor, no_restart=True)
            raise UserCodeError(f"worker {worker_id} could not start on Ray: {exc}",
                                where=spec.display_name,
                                hint="check the runtime environment (workspace, env vars)") from exc
        if not info.get("ok"):
            ray.kill(actor, no_restart=True)
            raise UserCodeError(info.get("error", "worker failed to start"),
                                where=info.get("where") or spec.display_name,
                                hint=info.get("hint"))
        log.info("%s: worker %s up on node %s (%s) in %.1f s", spec.display_name, worker_id,
                 info["node"][:12], info["host"], time.monotonic() - t0)
        return RayActorHandle(worker_id, actor, info, token)

    async def close(self) -> None:
        if self._ray is not None:
            for actor in self._actors:  # the pool stopped them; a start that raced close may not
                try:
                    self._ray.kill(actor, no_restart=True)
                except Exception:
                    pass
            self._actors.clear()
            self._ray = None
            disconnect()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _missing(spec: FunctionComponentSpec) -> bool:
    from rltune.functions.requirements import missing_requirements

    return bool(missing_requirements(spec.workspace))
