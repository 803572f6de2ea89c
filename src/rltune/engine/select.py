"""Build the engine a job, ``rltune serve`` or a server deployment asks for: ``builtin``/``vllm``.

The one place that maps an engine name and the job's inference keys onto an engine (jobs,
``rltune serve`` and ``rltune.lifecycle.serveproc`` all build through :func:`build_engine`).
:func:`check_engine_installed` refuses, by name and without importing it, an engine whose
package this installation lacks (the job server asks it before it records a deployment). A
key the chosen engine cannot honour is refused here, naming the key:

* ``inference_gpu_memory_utilization`` is vLLM's ``gpu_memory_utilization`` on CUDA. The
  built-in engine has no memory pool to size, and vLLM's CPU backend sizes its KV cache from
  ``VLLM_CPU_KVCACHE_SPACE`` (GiB), so both refuse it.
* Sleep mode (free the KV cache and offload weights while the trainer updates) is on when the
  vLLM engine shares a CUDA device with the trainer, and unavailable elsewhere; vLLM then takes
  ``COLOCATED_GPU_MEMORY_UTILIZATION`` of the GPU unless the job sets the key.
* ``inference_replicas`` > 1 starts that many engines (built-in or vLLM) behind one
  ``EngineGroup`` (``engine/group.py``); ``inference_replica_backend: ray`` starts them as Ray
  actors on the cluster's nodes (``engine/ray_replica.py``, CPU only in this build), each
  actor its own process with its own engine. Several vLLM engines in this process are refused
  (``config.job_rules.engine_key_problem``: vLLM's forward context is process-global).

Example:
    >>> from rltune.engine.select import ENGINE_NAMES
    >>> ENGINE_NAMES
    ('builtin', 'vllm')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rltune.config.job_rules import engine_key_problem
from rltune.names import ENGINES, REPLICA_BACKENDS
from rltune.sdk.errors import ConfigError

#: the engines build_engine starts (``builtin`` and ``vllm``), declared once in rltune.names
ENGINE_NAMES = ENGINES
_HP = "training.hyper_parameters."

#: vLLM's share of a GPU it shares with the trainer when the job does not set
#: ``inference_gpu_memory_utilization`` (vLLM's own default, 0.9, leaves the trainer nothing;
#: TRL's colocate mode defaults to 0.3 as well).
COLOCATED_GPU_MEMORY_UTILIZATION = 0.3


def check_engine_options(name: str, *, device: Optional[str] = "cpu",
                         gpu_memory_utilization: Optional[float] = None,
                         replicas: int = 1, replica_backend: str = "local") -> None:
    """Refuse an engine name or an inference key the engine cannot honour (before any load).

    ``device=None`` (not known yet, e.g. before the trainer picks one) skips the checks that
    depend on it.
    """
    if name not in ENGINE_NAMES:
        raise ConfigError(f"unknown engine {name!r}", where="engine",
                          hint="use one of: " + ", ".join(ENGINE_NAMES))
    if replica_backend not in REPLICA_BACKENDS:
        raise ConfigError(f"unknown inference_replica_backend {replica_backend!r}",
                          where=_HP + "inference_replica_backend",
                          hint="use one of: " + ", ".join(REPLICA_BACKENDS))
    # the same rules, and words, as the job config's (config/job_rules.py)
    problem = engine_key_problem(name, device=device,
                                 gpu_memory_utilization=gpu_memory_utilization,
                                 replicas=replicas, replica_backend=replica_backend)
    if problem is not None:
        key, _value, rule, fix = problem
        raise ConfigError(f"{key} {rule}", where=_HP + key, hint=fix)
    if name == "vllm":
        from rltune.engine.vllm_support import require_vllm

        require_vllm()


def available_engines() -> tuple[str, ...]:
    """The engines this installation can start: ``builtin``, and ``vllm`` where it is installed.

    Looks the package up without importing it (cheap enough for a request handler).
    """
    from rltune.engine.vllm_support import vllm_available

    return tuple(n for n in ENGINE_NAMES if n != "vllm" or vllm_available())


def check_engine_installed(name: str, where: str = "engine") -> None:
    """A :class:`ConfigError` naming ``engine: <name>`` unless that engine can start here."""
    if name not in ENGINE_NAMES:
        raise ConfigError(f"unknown engine {name!r}", where=where,
                          hint="use one of: " + ", ".join(ENGINE_NAMES))
    supported = available_engines()
    if name not in supported:
        from rltune.engine.vllm_support import INSTALL_HINT

        raise ConfigError(
            f"engine: {name} is not available here: vLLM is not installed (neither the vllm "
            f"nor the vllm-cpu package); supported here: {', '.join(supported)}",
            where=where, hint=f"install vLLM where the engine runs: {INSTALL_HINT}")


def build_engine(name: str, path: str | Path, *, model_name: str, device: str = "cpu",
                 dtype: str = "float32", threads: int = 2, max_batch_size: int = 64,
                 gpu_memory_utilization: Optional[float] = None,
                 colocated: bool = True, seed: int = 0, replicas: int = 1,
                 replica_backend: str = "local", ray_address: Optional[str] = None,
                 tensor_parallel_size: int = 1,
                 replica_devices: Optional[list[str]] = None) -> Any:
    """Start engine ``name`` on the model directory ``path``.

    ``replicas`` > 1 or ``replica_backend="ray"``: an ``EngineGroup`` over that many engines
    ``name``, here or as Ray actors on the cluster at ``ray_address`` (else ``RAY_ADDRESS``);
    ``replica_devices`` puts local replica ``i`` on its own device (default: all on
    ``device``). ``tensor_parallel_size`` is vLLM's (CUDA GPUs of the one engine).

    ``colocated``: the engine shares its device with a trainer (turns vLLM's sleep mode on
    where the device supports it). ``threads`` is the built-in engine's torch thread count;
    vLLM's CPU backend takes ``OMP_NUM_THREADS`` instead.
    """
    check_engine_options(name, device=device, gpu_memory_utilization=gpu_memory_utilization,
                         replicas=replicas, replica_backend=replica_backend)
    if replicas > 1 or replica_backend == "ray":
        return _build_group(name, path, replicas, replica_backend, ray_address=ray_address,
                            devices=replica_devices or [device] * replicas,
                            device=device, dtype=dtype, threads=threads, model_name=model_name,
                            max_batch_size=max_batch_size, seed=seed)
    if name == "vllm":
        from rltune.engine.vllm_engine import VLLMEngine

        shared_gpu = colocated and device.startswith("cuda")
        if shared_gpu and gpu_memory_utilization is None:
            gpu_memory_utilization = COLOCATED_GPU_MEMORY_UTILIZATION
        return VLLMEngine.from_pretrained(
            path, device=device, dtype=dtype, model_name=model_name,
            max_batch_size=max_batch_size, gpu_memory_utilization=gpu_memory_utilization,
            sleep_mode=shared_gpu, seed=seed, tensor_parallel_size=tensor_parallel_size)
    from rltune.engine.transformers_engine import TransformersEngine

    return TransformersEngine.from_pretrained(path, device=device, dtype=dtype, threads=threads,
                                              model_name=model_name,
                                              max_batch_size=max_batch_size)


def _build_group(name: str, path: str | Path, replicas: int, backend: str, *,
                 ray_address: Optional[str], devices: list[str], seed: int,
                 **kwargs: Any) -> Any:
    from rltune.engine.group import EngineGroup

    if backend == "ray":
        from rltune.engine.ray_replica import start_ray_replicas

        kwargs.pop("device")  # CPU actors (engine_key_problem refuses another device)
        return EngineGroup(start_ray_replicas(path, replicas, engine=name, address=ray_address,
                                              seed=seed, **kwargs))
    engines: list[Any] = []
    try:
        for replica_device in devices:  # built-in engines (vLLM is refused here: one per process)
            engines.append(build_engine(name, path, seed=seed,
                                        **{**kwargs, "device": replica_device}))
    except BaseException:
        for engine in engines:  # a later replica failed to load: stop the started ones
            engine.stop()
        raise
    return EngineGroup(engines)

