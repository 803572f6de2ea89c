"""Load the trained policy and its frozen KL reference onto the job's device.

The policy's weights are in ``weight_dtype(hp)`` (bf16 with ``bf16``, fp32 with
``fp32_master_weights`` or without bf16) on the job's device, so the optimizer state AdamW
creates lives there too. ``gradient_checkpointing`` recomputes each decoder layer's
activations in the backward pass. With LoRA the policy is its own reference (adapters
disabled); for full fine-tuning with the KL term on, or DPO, a frozen copy is loaded, on the
device or in CPU memory (``reference_offload``).

Example:
    >>> import torch
    >>> from rltune.config import HyperParameters
    >>> from rltune.trainer.testing import tiny_qwen2
    >>> model = prepare_policy(tiny_qwen2(), HyperParameters(gradient_checkpointing=True),
    ...                        torch.device("cpu"))
    >>> checkpointing_on(model), next(model.parameters()).dtype
    (True, torch.float32)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.trainer.device import frozen_dtype, home_device, weight_dtype
from rltune.trainer.lora import wrap_with_lora


def enable_checkpointing(model: Any) -> None:
    """Recompute each decoder layer in the backward pass (transformers 5.x spells it two ways).

    Non-reentrant checkpointing needs no input gradients, so frozen embeddings (LoRA) work.
    """
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.config.use_cache = False


def checkpointing_on(model: Any) -> bool:
    """Whether ``model`` recomputes its layers in the backward pass."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name) or hasattr(model, name):
            return bool(getattr(model, name))
    return False


def prepare_policy(model: Any, hp: HyperParameters, device: torch.device) -> Any:
    """Cast, place and (optionally) checkpoint a freshly loaded policy; wrap it with LoRA."""
    model = model.to(device=device, dtype=weight_dtype(hp))
    if hp.gradient_checkpointing:
        enable_checkpointing(model)
    if hp.lora_rank > 0:
        model = wrap_with_lora(model, hp)
    return model


def load_policy(
    path: Path, hp: HyperParameters, knobs: AlgorithmKnobs, device: torch.device,
    log: Callable[..., None],
) -> tuple[Any, Optional[Any]]:
    """(policy, frozen reference or None) for the model at ``path``."""
    from transformers import AutoModelForCausalLM

    model = prepare_policy(AutoModelForCausalLM.from_pretrained(path, dtype=weight_dtype(hp)),
                           hp, device)
    precision = {torch.bfloat16: "bf16", torch.float32: "fp32"}[weight_dtype(hp)]
    log(f"policy on {device} in {precision}"
        + (" (bf16 autocast)" if hp.bf16 and hp.fp32_master_weights else "")
        + (", gradient checkpointing" if hp.gradient_checkpointing else ""))
    if hp.lora_rank > 0:
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        log(f"LoRA rank {hp.lora_rank}, alpha {hp.lora_scale_alpha:g}: {trainable} trainable "
            "parameters; reference = adapters disabled")
        return model, None
    if not (knobs.use_kl_loss and knobs.kl_loss_coef > 0) and hp.algorithm != "dpo":
        return model, None  # DPO's loss always reads the reference (``trainer/dpo.py``)
    reference = AutoModelForCausalLM.from_pretrained(path, dtype=frozen_dtype(hp))
    reference.to(home_device(hp, device)).eval().requires_grad_(False)
    log(f"{'DPO' if hp.algorithm == 'dpo' else 'KL'} reference on {home_device(hp, device)}"
        + (f", moved to {device} for its forward passes" if hp.reference_offload else ""))
    return model, reference
