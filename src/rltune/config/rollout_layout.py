"""The inference engine's devices from the cloud's keys: ``n_gpus_rollout`` and
``inference_tensor_parallel_size`` (docs/gpu.md, "The cloud's distributed keys").

* ``inference_tensor_parallel_size: T`` (T > 1) is vLLM's ``tensor_parallel_size``; the
  built-in engine has no tensor parallelism and refuses it by name.
* ``n_gpus_rollout: N`` (N > 1) is the engine's CUDA devices: with the built-in engine N
  replicas behind one ``EngineGroup``, replica ``i`` on ``cuda:i``; with vLLM N = replicas x
  T, so N must be a multiple of T. ``inference_replicas``, when set too, must say the same.
  0 or 1 (or unset) is one engine on the job's ``device``.

Two checks, at two moments: :func:`layout_problems` when the config is read (it knows the
engine, not the machine: the client that submits may have no GPU) and
:func:`hardware_problems` where the job runs, with the CUDA device count of that machine
(``rltune.engine.placement.cuda_device_count``). Each returns every problem, so one error lists
them all, each naming the hardware or the key it needs.

Example:
    >>> from rltune.config import HyperParameters
    >>> rollout_layout("vllm", HyperParameters(n_gpus_rollout=4,
    ...                                        inference_tensor_parallel_size=2))
    RolloutLayout(replicas=2, tensor_parallel=2, gpus=4)
    >>> [p[2] for p in hardware_problems("builtin", HyperParameters(n_gpus_rollout=8),
    ...                                  cuda_devices=0, device="cpu")]
    ['needs 8 CUDA GPUs for the inference engine, and this machine has 0']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: (key, value, rule, fix) of a broken rule (as ``config.job_rules.Problem``).
Problem = tuple[str, Any, str, str]


@dataclass(frozen=True)
class RolloutLayout:
    """Engines behind the gateway, CUDA devices each (vLLM's tensor parallelism), and the CUDA
    devices the layout takes in all (0: one engine on the job's ``device``, whatever it is)."""

    replicas: int
    tensor_parallel: int
    gpus: int


def rollout_layout(engine: str, hp: Any) -> RolloutLayout:
    """The layout ``hp`` asks of ``engine`` (after :func:`layout_problems` found none)."""
    tp = hp.inference_tensor_parallel_size or 1
    n = hp.n_gpus_rollout or 0
    if n > 1:
        return RolloutLayout(replicas=max(1, n // tp), tensor_parallel=tp, gpus=n)
    return RolloutLayout(replicas=hp.inference_replicas or 1, tensor_parallel=tp,
                         gpus=tp if tp > 1 else 0)


def layout_problems(engine: str, hp: Any) -> list[Problem]:
    """What the job's engine cannot do with these keys, whatever the machine."""
    out: list[Problem] = []
    tp = hp.inference_tensor_parallel_size or 1
    n = hp.n_gpus_rollout or 0
    if tp > 1 and engine != "vllm":
        out.append(("inference_tensor_parallel_size", tp,
                    f"needs {tp} GPUs sharing one engine (tensor parallelism), which the "
                    "built-in engine does not do; vLLM does (its tensor_parallel_size)",
                    "set engine: vllm, or remove inference_tensor_parallel_size"))
    if n <= 1:
        return out
    if engine == "vllm" and n % tp:
        out.append(("n_gpus_rollout", n,
                    f"is vLLM replicas x inference_tensor_parallel_size ({tp}), and {tp} "
                    f"does not divide {n}",
                    f"set n_gpus_rollout to a multiple of {tp}, or change "
                    "inference_tensor_parallel_size"))
        return out
    replicas = n // tp if engine == "vllm" else n
    per = f" of {tp} GPUs each" if engine == "vllm" and tp > 1 else ", one GPU each"
    if hp.inference_replicas is not None and hp.inference_replicas != replicas:
        out.append(("inference_replicas", hp.inference_replicas,
                    f"contradicts n_gpus_rollout {n}, which is {replicas} engine replicas{per}",
                    "remove one of inference_replicas and n_gpus_rollout (or make them agree)"))
    if hp.device == "cpu":
        out.append(("n_gpus_rollout", n,
                    f"puts the inference engine on {n} CUDA GPUs, and device is cpu",
                    "remove n_gpus_rollout, or set device: auto (or cuda)"))
    if (hp.inference_replica_backend or "local") == "ray":
        out.append(("n_gpus_rollout", n,
                    f"puts {replicas} engine replicas on this machine's {n} CUDA GPUs; "
                    "inference_replica_backend ray runs them on the CPUs of the cluster's "
                    "nodes in this build", "remove one of n_gpus_rollout and "
                    "inference_replica_backend"))
    return out


def hardware_problems(engine: str, hp: Any, *, cuda_devices: int,
                      device: str) -> list[Problem]:
    """What this machine (``cuda_devices`` CUDA GPUs; the job's resolved ``device``) lacks for
    the layout; each names the count it needs and what the machine has."""
    out: list[Problem] = []
    tp = hp.inference_tensor_parallel_size or 1
    n = hp.n_gpus_rollout or 0
    have = f"this machine has {cuda_devices}"
    run_there = "or run the job on a machine with them"
    if n > 1 and cuda_devices < n:
        out.append(("n_gpus_rollout", n,
                    f"needs {n} CUDA GPUs for the inference engine, and {have}",
                    f"remove n_gpus_rollout (one engine on the job's device), {run_there}"))
    elif engine == "vllm" and n > tp:
        out.append(("n_gpus_rollout", n,
                    f"is {n // tp} vLLM engines of {tp} GPU(s) each; this build starts one "
                    f"vLLM engine per job on CUDA, on cuda:0..{tp - 1}",
                    f"set n_gpus_rollout: {tp} (= inference_tensor_parallel_size), or use "
                    "engine: builtin for one replica per GPU"))
    if engine == "vllm" and tp > 1 and (cuda_devices < tp or not device.startswith("cuda")):
        out.append(("inference_tensor_parallel_size", tp,
                    f"needs {tp} CUDA GPUs for vLLM's tensor parallelism, and {have}"
                    + ("" if device.startswith("cuda") else f" (the job runs on {device})"),
                    f"remove inference_tensor_parallel_size (vLLM on one device), {run_there}"))
    mem = hp.inference_gpu_memory_utilization
    if engine == "vllm" and mem is not None and not device.startswith("cuda"):
        out.append(("inference_gpu_memory_utilization", mem,
                    f"needs 1 CUDA GPU (the share of its memory vLLM takes), and {have}: "
                    f"the vllm engine runs on {device}, where vLLM sizes its KV cache from "
                    "VLLM_CPU_KVCACHE_SPACE (GiB)",
                    f"remove it (set VLLM_CPU_KVCACHE_SPACE instead), {run_there}"))
    return out
