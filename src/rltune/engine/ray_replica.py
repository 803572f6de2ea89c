"""An engine replica on any node of a Ray cluster: a Ray actor hosting an engine (the built-in
``TransformersEngine`` or a ``VLLMEngine``, started by ``engine.select.build_engine`` in the
actor), and the ``Engine`` the driver uses to talk to it.

The driver puts the model directory's files into Ray's object store once; every actor fetches
them, writes them to a temp folder on its node and loads the engine from there, so the nodes
need no shared filesystem and no copy of the model. Weight syncs go the same way:
:meth:`RayEngineReplica.pack_weights` puts the state dict in the object store once and every
actor loads that one object (``EngineGroup.update_weights`` packs once per sync). Each actor
reserves ``threads`` CPUs (its torch thread count; vLLM's CPU backend reads the same
``OMP_NUM_THREADS``) and the actors are spread over the nodes. A vLLM actor also gets the
driver's ``VLLM_*`` environment variables (``VLLM_CPU_KVCACHE_SPACE``,
``VLLM_CPU_OMP_THREADS_BIND``, ...), each actor being its own process with its own vLLM.
Sleep and wake-up reach each actor's engine (a no-op where it has no sleep mode: the built-in
engine, vLLM on a CPU). rltune itself reaches the nodes as a ``py_modules`` package, as for
function actors.

Example:
    >>> replicas = start_ray_replicas("/models/nano", 2, address="10.0.0.5:6379",
    ...                               threads=1)                 # doctest: +SKIP
    >>> engine = EngineGroup(replicas)                          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, Optional

from rltune.engine.base import Engine
from rltune.engine.types import GenerationRequest, GenerationResult, TokenDelta
from rltune.sdk.errors import ConfigError, RltuneError

WHERE = "training.hyper_parameters.inference_replica_backend"
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class EngineActor:
    """Runs in the actor process: one engine (``kind``: ``builtin`` or ``vllm``) loaded from
    shipped model files, on the actor's CPU."""

    def __init__(self, files: dict[str, bytes], kind: str, kwargs: dict[str, Any]):
        from rltune.engine.select import build_engine

        self.dir = unpack_model_files(files, "rltune-engine-")
        try:  # not colocated: no trainer shares this process's device
            self.engine: Engine = build_engine(kind, self.dir, device="cpu", colocated=False,
                                               **kwargs)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    async def info(self) -> dict[str, Any]:
        import ray

        from rltune._ray import node_address

        return {"node": ray.get_runtime_context().get_node_id(), "host": node_address(ray),
                "pid": os.getpid(), "max_context": self.engine.max_context,
                "constrains_json": self.engine.constrains_json,
                "model_name": self.engine.model_name, "version": self.engine.weight_version}

    async def stats(self) -> dict[str, Any]:
        """The engine's counters (steps, tokens, aborted requests, ...)."""
        return dict(getattr(self.engine, "stats", {}))

    async def generate_one(self, request: GenerationRequest) -> GenerationResult:
        return await self.engine.generate_one(request)

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        async for delta in self.engine.stream(request):
            yield delta

    async def update_weights(self, state: dict[str, Any]) -> int:
        return await self.engine.update_weights(state)

    async def pause(self) -> None:
        await self.engine.pause()

    async def resume(self) -> None:
        await self.engine.resume()

    async def sleep(self) -> bool:
        return bool(await self.engine.sleep())

    async def wake_up(self) -> None:
        await self.engine.wake_up()

    async def close(self) -> None:
        await self.engine.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def actor_env(engine: str, threads: int) -> dict[str, str]:
    """An engine actor's environment: its thread count, and for vLLM the driver's ``VLLM_*``
    variables (e.g. ``VLLM_CPU_KVCACHE_SPACE``, the KV cache in GiB)."""
    env = dict.fromkeys(_THREAD_VARS, str(threads))
    if engine == "vllm":
        env.update({k: v for k, v in os.environ.items() if k.startswith("VLLM_")})
    return env


def model_files(path: str | Path) -> dict[str, bytes]:
    """Every file of a model directory (relative path -> bytes), as an actor rebuilds it."""
    root = Path(path)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def unpack_model_files(files: dict[str, bytes], prefix: str) -> Path:
    """``model_files``' result written to a new temp folder on this node (its path)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    for name, data in files.items():
        dest = root / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return root


def _unwrap(exc: BaseException) -> BaseException:
    """The actor's own rltune error (e.g. a too-long prompt) rather than Ray's wrapper."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, RltuneError) else exc


class RayEngineReplica(Engine):
    """The driver's side of one engine actor (it implements ``Engine`` by remote calls)."""

    def __init__(self, ray: Any, actor: Any, info: dict[str, Any], tokenizer: Any,
                 model_config: Any = None):
        self.ray, self.actor, self.info = ray, actor, info
        self.tokenizer = tokenizer
        self.model_config = model_config  # the HF config, read on the driver
        self.model_name = info["model_name"]
        self.max_context = int(info["max_context"])
        self.constrains_json = bool(info.get("constrains_json", False))
        self._version = int(info["version"])
        self._closed = False

    @staticmethod
    def pack_weights(state: dict[str, Any]) -> Any:
        """Put a state dict into the object store once (CPU tensors); actors load the ref."""
        import ray

        return ray.put({k: v.detach().to("cpu") for k, v in state.items()})

    @property
    def weight_version(self) -> int:
        return self._version

    async def _call(self, method: str, *args: Any) -> Any:
        ref = getattr(self.actor, method).remote(*args)
        try:
            return await ref
        except asyncio.CancelledError:
            self.ray.cancel(ref)
            raise
        except self.ray.exceptions.RayTaskError as exc:
            err = _unwrap(exc)
            if err is exc:
                raise
            raise err from None

    async def generate_one(self, request: GenerationRequest) -> GenerationResult:
        result: GenerationResult = await self._call("generate_one", request)
        return result

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        gen = self.actor.stream.options(num_returns="streaming").remote(request)
        remaining = request.sampling.n
        try:
            async for ref in gen:
                try:
                    delta = await ref
                except self.ray.exceptions.RayTaskError as exc:
                    err = _unwrap(exc)
                    if err is exc:
                        raise
                    raise err from None
                if delta.finished is not None:
                    remaining -= 1
                yield delta
        finally:
            if remaining:  # the caller left early: free the actor's rows
                self.ray.cancel(gen)

    async def update_weights(self, weights: Any) -> int:
        if not isinstance(weights, self.ray.ObjectRef):
            state = weights.state_dict() if hasattr(weights, "state_dict") else weights
            weights = self.pack_weights(state)
        self._version = int(await self._call("update_weights", weights))
        return self._version

    async def pause(self) -> None:
        await self._call("pause")

    async def resume(self) -> None:
        await self._call("resume")

    async def sleep(self) -> bool:
        return bool(await self._call("sleep"))

    async def wake_up(self) -> None:
        await self._call("wake_up")

    async def close(self) -> None:
        """Close the engine and end the actor (also when it is already dead)."""
        if self._closed:
            return
        self._closed = True
        from rltune._ray import disconnect

        try:
            await asyncio.wait_for(self._call("close"), 60)
        except Exception:  # dead or stuck: the kill below ends it either way
            pass
        finally:
            try:
                self.ray.kill(self.actor, no_restart=True)
            except Exception:
                pass
            disconnect()


def start_ray_replicas(path: str | Path, count: int, *, engine: str = "builtin",
                       address: Optional[str] = None, threads: int = 1, dtype: str = "float32",
                       model_name: str = "model", max_batch_size: int = 64, seed: int = 0,
                       start_timeout: float = 300.0,
                       ship_rltune: bool = True) -> list[RayEngineReplica]:
    """Start ``count`` actors of engine ``engine`` (``threads`` CPUs each, spread over the
    nodes) on the cluster at ``address`` (else ``RAY_ADDRESS``); return their replicas once
    all serve.

    ``ship_rltune``: send this process's rltune package with the actors (``py_modules``);
    turn it off when the nodes have rltune installed."""
    from rltune._ray import connect, disconnect, ship_package
    from rltune.engine.transformers_engine import load_tokenizer

    ray = connect(address, what="inference_replica_backend ray", where=WHERE)
    actors: list[Any] = []
    try:
        env: dict[str, Any] = {"env_vars": actor_env(engine, threads)}
        if ship_rltune:
            env.update(ship_package())
        files = ray.put(model_files(path))
        kwargs = {"dtype": dtype, "threads": threads, "model_name": model_name,
                  "max_batch_size": max_batch_size, "seed": seed}
        cls = ray.remote(EngineActor)
        for _ in range(count):
            actors.append(cls.options(num_cpus=threads, max_restarts=0, runtime_env=env,
                                      scheduling_strategy="SPREAD").remote(
                                          files, engine, kwargs))
        try:
            infos = ray.get([a.info.remote() for a in actors], timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            free = ray.available_resources().get("CPU", 0.0)
            raise ConfigError(
                f"{count} engine replica(s) did not start on Ray within {start_timeout:.0f} s "
                f"(each asks for {threads} CPU(s); the cluster has {free} free)",
                where=WHERE, hint="add nodes, or lower RLTUNE_TORCH_THREADS or "
                "inference_replicas") from None
        from transformers import AutoConfig

        tokenizer, config = load_tokenizer(path), AutoConfig.from_pretrained(path)
        replicas = []
        for actor, info in zip(actors, infos, strict=True):
            connect(address, where=WHERE)  # each replica holds the connection until it closes
            replicas.append(RayEngineReplica(ray, actor, info, tokenizer, config))
        return replicas
    except BaseException:
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        raise
    finally:
        disconnect()
