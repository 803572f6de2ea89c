"""What the job asks of the machine it runs on, checked once, before anything starts: the
``device``, the Ray cluster of ``nnodes_training`` and the inference engine's CUDA GPUs
(``n_gpus_rollout``, ``inference_tensor_parallel_size``, ``inference_gpu_memory_utilization``:
``rltune.config.rollout_layout``). Every problem comes in one ``ConfigError``, each naming the
key, what it needs and what this machine has.

The config's own checks cannot do this: they also run on a client that submits to a server
and has no GPU itself. The CUDA device count comes from one function,
``rltune.engine.placement.cuda_device_count``.

Example:
    >>> from rltune.config import load_job_config_text
    >>> job = load_job_config_text("model: m\\ntraining: {hyper_parameters: {device: cpu}}\\n")
    >>> check_machine(job)
    (device(type='cpu'), False)
"""

from __future__ import annotations

from typing import Any

import torch

from rltune.config import JobConfig
from rltune.config.rollout_layout import hardware_problems
from rltune.sdk.errors import ConfigError
from rltune.trainer.device import resolve_device

_HP = "training.hyper_parameters."


def check_machine(config: JobConfig) -> tuple[torch.device, bool]:
    """(the job's device, whether its trainer ranks are Ray actors), or one ``ConfigError``
    listing everything this machine cannot give the job."""
    from rltune.config.job_rules import ray_trainer_ranks
    from rltune.engine import placement

    hp = config.hyper_parameters
    errors: list[ConfigError] = []
    device, on_ray = torch.device("cpu"), False
    try:
        device = resolve_device(hp.device)
    except ConfigError as err:
        errors.append(err)
    try:
        on_ray = ray_trainer_ranks(hp, config.function_backend)
    except ConfigError as err:
        errors.append(err)
    for key, value, rule, fix in hardware_problems(
            config.engine or "builtin", hp, cuda_devices=placement.cuda_device_count(),
            device=str(device)):
        errors.append(ConfigError(f"{key} = {value!r}: {rule}", where=_HP + key, hint=fix))
    if len(errors) == 1:
        raise errors[0]
    if errors:
        lines = [f"{len(errors)} problems on this machine:"]
        lines += [f"  - {err.message} (fix: {err.hint})" for err in errors]  # each names its key
        error = ConfigError("\n".join(lines))
        error.details = [_detail(e) for e in errors]  # type: ignore[attr-defined]
        raise error
    return device, on_ray


def _detail(err: ConfigError) -> dict[str, Any]:
    return {"field": err.where, "rule": err.message, "fix": err.hint}
