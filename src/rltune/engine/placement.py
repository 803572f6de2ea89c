"""Where a served model runs and in which precision when the caller says ``auto``.

``rltune serve`` and the job server's deployments default to ``device="auto"`` and
``dtype="auto"``: CUDA when torch sees a GPU, else the CPU; bf16 on a GPU that supports it,
fp32 on the CPU (where bf16 matmuls are slow or missing). Given values are kept as they are.

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
