"""LoRA adapters through ``peft`` (``lora_rank > 0``): wrap the policy, give the engine and the
checkpoint merged full weights, and compute reference log-probs with the adapters disabled.

With LoRA the base weights never change, so the KL reference is the policy itself with its
adapters switched off: no second copy of the model is loaded. The engine holds a plain
Hugging Face model, so it gets ``W + (alpha/r)·B·A`` under the base model's parameter names;
a checkpoint is a plain Hugging Face folder of those merged weights (``from_pretrained``,
chat and serving work unchanged) plus the adapter in ``adapter/`` so resume continues the
adapters, not a re-factorisation of the merged weights.

``peft`` is imported only here and only when LoRA is used.

Example:
    >>> import torch
    >>> from rltune.config import HyperParameters
    >>> from rltune.trainer.testing import tiny_qwen2
    >>> policy = wrap_with_lora(tiny_qwen2(), HyperParameters(lora_rank=4))
    >>> is_lora(policy), is_lora(tiny_qwen2())
    (True, False)
    >>> names = [n for n, p in policy.named_parameters() if p.requires_grad]
    >>> all(".lora_A." in n or ".lora_B." in n for n in names)
    True
    >>> merged = merged_state_dict(policy)  # B starts at 0: merged == base at first
    >>> set(merged) == set(tiny_qwen2().state_dict())
    True
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltune.sdk.errors import ConfigError, ValidationError

if TYPE_CHECKING:
    import torch

    from rltune.config.hyperparams import HyperParameters

ADAPTER_DIR = "adapter"  # sub-folder of a checkpoint that holds the LoRA adapter


def is_lora(model: Any) -> bool:
    """True for a ``peft`` LoRA-wrapped model (without importing peft when nobody has)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def wrap_with_lora(model: Any, hp: HyperParameters) -> Any:
    """``model`` with LoRA adapters per ``hp``; only the adapter weights stay trainable.

    The base model is modified in place (its target layers get adapters), as peft does.
    """
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=hp.lora_rank,
        lora_alpha=hp.lora_scale_alpha,
        lora_dropout=hp.lora_dropout,
        target_modules=hp.lora_target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        with warnings.catch_warnings():
            # peft asks transformers 5 a deprecated question on every wrap; not the user's.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing",
                                    category=FutureWarning)
            return get_peft_model(model, config)
    except ValueError as err:  # peft: "Target modules {...} not found in the base model"
        raise ConfigError(
            f"training.hyper_parameters.lora_target_modules = {hp.lora_target_modules!r}: "
            f"{err}",
            where="training.hyper_parameters.lora_target_modules",
            hint="use 'all-linear' or names of this model's linear layers: "
            + ", ".join(linear_module_names(model)),
        ) from err


def linear_module_names(model: Any) -> list[str]:
    """Distinct short names of the model's linear layers (for the target-modules hint)."""
    import torch

    names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules()
             if isinstance(m, torch.nn.Linear)}
    return sorted(names)


def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The full weights ``W + (alpha/r)·B·A`` under the base model's parameter names.

    Computed beside the model, not by peft's merge/unmerge: a merge followed by an unmerge
    rounds, and the base weights (which are also the KL reference) must stay bit-exact.
    Tensors not touched by an adapter are the model's own (shared, not copied).
    """
    import torch
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer) and not module.disable_adapters:
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        delta = module.get_delta_weight(adapter).detach()
                        deltas[name] = deltas[name] + delta if name in deltas else delta
        out: dict[str, torch.Tensor] = {}
        for key, value in base.state_dict().items():
            if ".lora_" in key:
                continue
            clean = key.replace(".base_layer.", ".")
            module_name, _, leaf = clean.rpartition(".")
            if leaf == "weight" and module_name in deltas:
                value = value + deltas[module_name].to(value.dtype)
            out[clean] = value
    return out


def engine_weights(model: Any) -> Any:
    """What the engine loads after an update: merged weights for LoRA, else the model."""
    return merged_state_dict(model) if is_lora(model) else model


@contextmanager
def adapters_disabled(model: Any) -> Iterator[Any]:
    """Run ``model`` as its base model (the KL reference) inside the block."""
    if not is_lora(model):
        raise TypeError("adapters_disabled() needs a LoRA model (see wrap_with_lora)")
    with model.disable_adapter():
        yield model


def save_lora(model: Any, folder: str | Path) -> None:
    """Merged weights as a plain Hugging Face model in ``folder``, the adapter in
    ``folder/adapter``."""
    folder = Path(folder)
    # save_pretrained drops tied keys from the dict it is given: hand it a copy.
    model.get_base_model().save_pretrained(folder, state_dict=dict(merged_state_dict(model)))
    model.save_pretrained(folder / ADAPTER_DIR)


def load_adapter(model: Any, folder: str | Path) -> None:
    """Load a checkpoint's adapter weights into the LoRA ``model`` (whose base is the job's
    original base model)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / ADAPTER_DIR / "adapter_model.safetensors"
    if not path.is_file():
        raise ValidationError(
            f"{folder} has no LoRA adapter ({ADAPTER_DIR}/adapter_model.safetensors)",
            where=str(folder),
            hint="resume a LoRA job from a checkpoint it saved, or set lora_rank: 0 to "
            "resume a full fine-tuning checkpoint",
        )
    try:
        result = set_peft_model_state_dict(model, load_file(path))
    except RuntimeError as err:  # size mismatch: another lora_rank
        raise ValidationError(
            f"the adapter in {path} does not fit this model: {err}",
            where=str(path),
            hint="resume with the lora_rank and lora_target_modules the checkpoint was "
            "trained with",
        ) from err
    missing = [k for k in result.missing_keys if ".lora_" in k]
    if missing or result.unexpected_keys:
        raise ValidationError(
            f"the adapter in {path} covers other modules than this job's "
            f"({len(missing)} missing, {len(result.unexpected_keys)} unexpected)",
            where=str(path),
            hint="resume with the lora_target_modules the checkpoint was trained with",
        )
