"""Where a served model runs and in which precision when the caller says ``auto``.

``rltune serve`` and the job server's deployments default to ``device="auto"`` and
``dtype="auto"``: CUDA when torch sees a GPU, else the CPU; bf16 on a GPU that supports it,
fp32 on the CPU (where bf16 matmuls are slow or missing). Given values are kept as they are.
``replica_devices`` places a job's engine replicas (``n_gpus_rollout``: one CUDA device each).

Example:
    >>> auto_placement("cpu", "auto")
    ('cpu', 'float32')
    >>> auto_placement("cpu", "bfloat16")
    ('cpu', 'bfloat16')
"""

from __future__ import annotations


def auto_placement(device: str = "auto", dtype: str = "auto") -> tuple[str, str]:
    """``(device, dtype)`` with ``auto`` resolved for this machine."""
    if device == "auto" or dtype == "auto":
        import torch

        gpu = torch.cuda.is_available()
        if device == "auto":
            device = "cuda" if gpu else "cpu"
        if dtype == "auto":
            on_gpu = device.startswith("cuda") and gpu
            dtype = "bfloat16" if on_gpu and torch.cuda.is_bf16_supported() else (
                "float16" if on_gpu else "float32")
    return device, dtype


def cuda_device_count() -> int:
    """CUDA devices torch sees on this machine (0 on a CPU build): the one hardware query of
    the engine's layout checks (``rltune.trainer.machine``)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def replica_devices(device: str, replicas: int, gpus: int) -> list[str]:
    """The device of each engine replica: ``gpus`` > 1 (``n_gpus_rollout``) puts replica ``i``
    on ``cuda:i``; otherwise every replica shares the job's ``device``.

    Example:
        >>> replica_devices("cuda:0", 2, gpus=2), replica_devices("cpu", 2, gpus=0)
        (['cuda:0', 'cuda:1'], ['cpu', 'cpu'])
    """
    if gpus > 1:
        return [f"cuda:{i}" for i in range(replicas)]
    return [device] * replicas
