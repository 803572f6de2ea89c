"""AdamW and the learning-rate schedule (``lr_scheduler_type`` + ``lr_warmup_steps``).

The scheduler steps once per *training step* (not per mini-batch), so ``lr_warmup_steps`` and
the schedule length are in the same unit as ``eval_steps`` and ``save_steps``.

Example:
    >>> lr_factor(0, total_steps=10, warmup_steps=2, kind="linear")
    0.3333333333333333
    >>> lr_factor(2, total_steps=10, warmup_steps=2, kind="linear")
    1.0
    >>> round(lr_factor(9, total_steps=10, warmup_steps=2, kind="cosine"), 4)
    0.0381
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from rltune.config.hyperparams import HyperParameters


def lr_factor(
    step: int, *, total_steps: int, warmup_steps: int, kind: str, min_ratio: float = 0.0
) -> float:
    """Multiplier of the base learning rate at training step ``step`` (0-based).

    Warmup rises linearly from ``1/(w+1)`` to 1 (never 0, so the first step learns); then
    ``constant`` stays at 1, ``linear`` falls towards 0 and ``cosine`` towards ``min_ratio``
    at the last step.
    """
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    if kind == "constant":
        return 1.0
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    if kind == "cosine":
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown lr_scheduler_type {kind!r}")


def build_optimizer(model: torch.nn.Module, hp: HyperParameters) -> torch.optim.Optimizer:
    """AdamW over trainable parameters; biases and norm weights get no weight decay."""
    import torch

    decay: list[Any] = []
    no_decay: list[Any] = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": hp.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=hp.learning_rate,
                             betas=(0.9, 0.999), eps=1e-8)


def build_scheduler(
    optimizer: torch.optim.Optimizer, hp: HyperParameters, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """The LambdaLR implementing ``lr_factor`` for this job."""
    import torch

    warmup = hp.warmup_steps(total_steps)
    kind, floor = hp.lr_scheduler_type, hp.min_lr_ratio

    def factor(step: int) -> float:
        return lr_factor(step, total_steps=total_steps, warmup_steps=warmup, kind=kind,
                         min_ratio=floor)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
