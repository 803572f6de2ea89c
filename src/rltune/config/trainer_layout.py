"""The trainer's layout keys, checked when the hyper-parameters are read: the distributed keys
this build honours only at one value (refused by name, naming the hardware they would need),
and what data-parallel trainer ranks and Ray-placed ranks support (the engine's devices are
``config/rollout_layout.py``'s)."""

from __future__ import annotations

from typing import Any

from rltune.config._base import coupling, problem, problems

#: The distributed-layout keys this build honours only at these values; anything else is
#: refused, not ignored, naming the hardware it would need. The update runs on
#: ``n_gpus_training`` data-parallel ranks (``check_data_parallel``); the engine's devices,
#: ``n_gpus_rollout`` and ``inference_tensor_parallel_size``, depend on the engine and the
#: machine (``config/rollout_layout.py``).
DISTRIBUTED_SUPPORTED: dict[str, tuple[int, ...]] = {
    "nnodes_rollout": (1,),
    "tensor_model_parallel_size": (1,),
    "pipeline_model_parallel_size": (1,),
    "sequence_parallel_size": (1,),
    "expert_model_parallel_size": (1,),
}


def refuse_distributed(hp: Any) -> None:
    """Every distributed key this build cannot honour, in one error naming what each needs."""
    found = []
    for name, allowed in DISTRIBUTED_SUPPORTED.items():
        value = getattr(hp, name)
        if value is None or value in allowed:
            continue
        training = name in _TRAINING_LAYOUT
        need = (f"{value} GPUs per trainer replica for model parallelism" if training
                else f"{value} nodes of inference GPUs")
        what = ("it trains on data-parallel ranks only (n_gpus_training: N per node, "
                "nnodes_training: N nodes on a Ray cluster)" if training else
                "its engine replicas run on the job's machine (n_gpus_rollout: N GPUs) or on "
                "the CPUs of a Ray cluster's nodes (inference_replica_backend: ray)")
        found.append(problem(
            name, value, f"needs {need}, which is not supported by this build: {what}, so {name} "
            f"may be {' or '.join(str(a) for a in allowed)} (or unset)",
            f"remove {name} (or set it to {allowed[-1]})"
            + ("; use n_gpus_training: N for N data-parallel trainer ranks" if training else
               "; use n_gpus_rollout: N for N inference GPUs on this machine")))
    if found:
        raise problems(found)


_TRAINING_LAYOUT = ("tensor_model_parallel_size",
                    "pipeline_model_parallel_size", "sequence_parallel_size",
                    "expert_model_parallel_size")


def check_data_parallel(hp: Any) -> None:
    """``n_gpus_training: N`` > 1 trains on N data-parallel ranks (``trainer/parallel/ranks.py``),
    which do not support LoRA yet (the KL term runs on every rank: each holds its own frozen
    reference, ``trainer/parallel/distributed.py``)."""
    n, key = hp.trainer_ranks, hp.trainer_ranks_key
    if n > 1 and hp.lora_rank > 0:
        raise coupling(
            key, getattr(hp, key),
            f"with more than one trainer rank does not support LoRA yet (lora_rank "
            f"{hp.lora_rank})",
            f"set lora_rank: 0 (full fine-tuning), or {key}: 1",
        )
    if hp.checkpoint_format == "sharded" and hp.lora_rank > 0:
        raise coupling(
            "checkpoint_format", "sharded",
            "does not support LoRA yet (a LoRA checkpoint saves its adapter)",
            "remove checkpoint_format (full), or set lora_rank: 0")
    if hp.trainer_cpus_per_rank is not None and hp.nnodes_training is None:
        raise coupling(
            "trainer_cpus_per_rank", hp.trainer_cpus_per_rank,
            "only applies to trainer ranks on a Ray cluster, which nnodes_training asks for",
            "set nnodes_training (with function_backend: ray or --ray-address), or remove "
            "trainer_cpus_per_rank")
    if hp.trainer_placement is not None and hp.nnodes_training is None:
        raise coupling(
            "trainer_placement", hp.trainer_placement,
            "only applies to trainer ranks on a Ray cluster, which nnodes_training asks for",
            "set nnodes_training (with function_backend: ray or --ray-address), or remove "
            "trainer_placement")
