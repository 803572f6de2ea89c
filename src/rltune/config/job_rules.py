"""The job's rules that read more than one block: the distributed layout and the engine keys
the chosen engine cannot honour.

They run in ``JobConfig``'s validator, so ``rltune train``, the job server and the SDK refuse
the same jobs, with the key, the rule and the fix (the distributed ones all in one error).
``engine_key_problem`` is also the rule ``rltune.engine.select`` can apply once the device is
known.

Example:
    >>> from rltune.config.job_rules import engine_key_problem
    >>> engine_key_problem("builtin", gpu_memory_utilization=0.5)[:2]
    ('inference_gpu_memory_utilization', 0.5)
    >>> engine_key_problem("vllm", device="cuda:0", gpu_memory_utilization=0.5) is None
    True
"""

from __future__ import annotations

from typing import Any, Optional

from rltune.config._base import coupling
from rltune.names import OFFLINE_ALGORITHMS

_HP = "training.hyper_parameters."

#: (key, value, rule, fix) of a broken rule.
Problem = tuple[str, Any, str, str]


def check_offline(job: Any) -> None:
    """An ``sft`` or ``dpo`` job trains on its rows alone: it runs no rollout, reward function
    or teacher (those run in an RL job started from its published model)."""
    algorithm = job.training.hyper_parameters.algorithm
    if algorithm in OFFLINE_ALGORITHMS and (job.functions or job.teacher_model):
        rows = "messages" if algorithm == "sft" else "preference pairs"
        raise coupling(_HP + "algorithm", algorithm,
                       f"algorithm {algorithm} trains on the rows' {rows}: it runs no rollout, "
                       "reward function or teacher", "remove functions and teacher_model (run "
                       f"them in an RL job from the published {algorithm.upper()} model)")


def check_publish_and_split(job: Any) -> None:
    """``publish_checkpoint`` needs ``tuned_model_name``; ``data_options.validation_percentage``
    and a validation dataset exclude each other (as on Ark)."""
    if job.publish_checkpoint != "best" and not job.tuned_model_name:
        raise coupling("publish_checkpoint", job.publish_checkpoint,
                       "publish_checkpoint chooses what tuned_model_name publishes",
                       "set tuned_model_name: <name>, or remove publish_checkpoint")
    options = job.data_options
    if options and options.validation_percentage is not None and job.validation_datasets:
        raise coupling("data_options.validation_percentage", options.validation_percentage,
                       "validation_percentage splits the validation rows off the training rows, "
                       "and this job also has a validation dataset",
                       "remove one of them (Ark: they are exclusive)")


def ray_trainer_ranks(hp: Any, function_backend: Any) -> bool:
    """Whether the job's trainer ranks are Ray actors (``trainer/parallel/ray_ranks.py``): it sets
    ``nnodes_training`` and has a Ray cluster; refused, naming the key, for
    ``nnodes_training`` > 1 without one. Applied once the cluster is known (``rltune train
    --ray-address`` and the job server set ``function_backend`` after the YAML is read)."""
    on_ray = function_backend is not None and function_backend.type == "ray"
    if (hp.nnodes_training or 1) > 1 and not on_ray:
        from rltune.sdk.errors import ConfigError

        raise ConfigError(
            f"nnodes_training: {hp.nnodes_training} needs a Ray cluster: trainer ranks on "
            "several nodes are Ray actors, and this job has none (function_backend is not ray)",
            where=_HP + "nnodes_training",
            hint="run with `rltune train --ray-address <head>:6379` (or function_backend: ray, or "
            "a job server started with --ray-address), or set nnodes_training: 1 and "
            "n_gpus_training: N for N ranks on this machine")
    if hp.trainer_placement is not None and not on_ray:
        from rltune.sdk.errors import ConfigError

        raise ConfigError(
            f"trainer_placement: {hp.trainer_placement} places trainer ranks on a Ray cluster, "
            "and this job has none (function_backend is not ray)",
            where=_HP + "trainer_placement",
            hint="remove trainer_placement, or run on a cluster (--ray-address)")
    return on_ray and hp.nnodes_training is not None and hp.trainer_ranks > 1


def engine_key_problem(engine: str, *, device: Optional[str] = None,
                       gpu_memory_utilization: Optional[float] = None, replicas: int = 1,
                       replica_backend: str = "local") -> Optional[Problem]:
    """The first inference key ``engine`` cannot honour, or None. ``device`` None (``auto``,
    not known yet) skips the rules that depend on it."""
    if gpu_memory_utilization is not None:
        if engine == "builtin":
            return ("inference_gpu_memory_utilization", gpu_memory_utilization,
                    "is a vLLM setting; the built-in engine has no memory pool to size",
                    "unset it, or set engine: vllm on a GPU")
        if device is not None and not device.startswith("cuda"):
            return ("inference_gpu_memory_utilization", gpu_memory_utilization,
                    f"needs a CUDA device; the vllm engine runs on {device}, where vLLM sizes "
                    "its KV cache from VLLM_CPU_KVCACHE_SPACE (GiB)",
                    "unset it and set VLLM_CPU_KVCACHE_SPACE, or run on a GPU")
    if replica_backend == "ray" and device is not None and device != "cpu":
        return ("inference_replica_backend", replica_backend,
                f"runs each engine replica on the CPU of its node in this build; the job's "
                f"device is {device}", "set device: cpu, or use inference_replica_backend: local")
    if engine == "vllm" and replicas > 1 and replica_backend == "local":
        return ("inference_replicas", replicas,
                "with engine: vllm needs one process per replica: vLLM keeps the running "
                "forward pass's context (attention metadata, KV cache per layer name) in one "
                "process-global variable, so two vLLM engines stepping in the job's process "
                "read each other's (vllm-cpu 0.32.0 fails with 'Forward context is not set')",
                "set inference_replica_backend: ray (each replica a Ray actor, its own "
                "process), or inference_replicas: 1")
    return None


def check_distributed_keys(engine: str, hp: Any) -> None:
    """The job's trainer ranks and engine keys, every problem in one error, with the device
    the job names (``auto``, and the machine's GPUs, are checked where the job runs:
    ``rltune.trainer.machine``)."""
    from rltune.config._base import problem as one
    from rltune.config._base import problems
    from rltune.config.rollout_layout import layout_problems

    found = layout_problems(engine, hp)  # n_gpus_rollout, inference_tensor_parallel_size
    first = engine_key_problem(
        engine, device=None if hp.device == "auto" else hp.device,
        gpu_memory_utilization=hp.inference_gpu_memory_utilization,
        replicas=hp.inference_replicas or 1,
        replica_backend=hp.inference_replica_backend or "local")
    if first is not None and first[0] not in {p[0] for p in found}:
        found.append(first)
    if engine == "vllm" and hp.max_staleness and hp.temperature != 1.0:
        found.append(("temperature", hp.temperature,
                      "must be 1.0 with max_staleness >= 1 on engine: vllm: the off-policy "
                      "correction divides by the log-probs of the distribution that sampled, "
                      "and vLLM reports them at temperature 1 (raw_logprobs)",
                      "remove temperature (1.0), use engine: builtin, or set max_staleness: 0"))
    if len(found) == 1:
        key, value, rule, fix = found[0]
        raise coupling(_HP + key, value, rule, fix)
    if found:
        raise problems([one(_HP + key, value, rule, fix) for key, value, rule, fix in found])
