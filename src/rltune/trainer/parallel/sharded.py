"""Sharded checkpoints (``checkpoint_format: sharded``) with ``torch.distributed.checkpoint``.

Each trainer rank writes its own shards of the policy and of the optimizer state into
``<checkpoint>/sharded/`` (``__<rank>_0.distcp`` files plus the ``.metadata`` that rank 0
writes), so no rank gathers the whole model for a checkpoint. Loading reshards: a checkpoint
saved on N ranks resumes on M ranks, one process (no process group) included, because DCP
reads each rank's slices of every tensor from whichever files hold them. The checkpoint folder
must be one every rank reaches at the same path (a shared filesystem across nodes).

The rest of the checkpoint is written by the job process as for full checkpoints:
``config.json``, the tokenizer, ``training_state.pt`` (scheduler and step only), RNG states and
``trainer_state.json``. :func:`consolidate` turns such a checkpoint into a plain Hugging Face
folder (``rltune models export`` / ``publish`` call it).

Example (``save_sharded`` on every rank, ``load_sharded`` on any number of ranks):
    >>> save_sharded(model, optimizer, "ckpt/sharded")        # doctest: +SKIP
    >>> load_sharded(model, optimizer, "ckpt/sharded")        # doctest: +SKIP
    >>> consolidate("ckpt", "exported")                       # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

#: The folder of a checkpoint that holds the DCP shards.
SHARDED_DIR = "sharded"
#: The files a sharded checkpoint keeps besides its shards, which an export copies.
_SIDE_FILES = ("training_state.pt", "rng_state.pt", "trainer_state.json")


@contextmanager
def _one_process_is_meant() -> Iterator[None]:
    """DCP warns when it runs without a process group; one process is a supported case."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def is_sharded(checkpoint: str | Path) -> bool:
    """Whether ``checkpoint`` holds its weights as DCP shards (no full weights file)."""
    return (Path(checkpoint) / SHARDED_DIR / ".metadata").is_file()


def save_sharded(model: torch.nn.Module, optimizer: Any, path: str | Path) -> None:
    """Write this rank's shards of ``model`` and ``optimizer`` to ``path`` (every rank calls
    it; without a process group the one process writes everything)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    with _one_process_is_meant():
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(path))


def load_sharded(model: torch.nn.Module, optimizer: Any, path: str | Path) -> None:
    """Load ``save_sharded``'s shards into ``model`` and ``optimizer``, however many ranks
    wrote them and however many load them (every rank calls it)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    with _one_process_is_meant():
        dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])


def sharded_weights(checkpoint: str | Path) -> dict[str, torch.Tensor]:
    """The full weights of a sharded checkpoint (CPU, fp32), read in this one process."""
    import torch.distributed.checkpoint as dcp
    from transformers import AutoConfig, AutoModelForCausalLM

    checkpoint = Path(checkpoint)
    config = AutoConfig.from_pretrained(checkpoint)
    with torch.device("meta"):
        shell = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Every tensor the checkpoint's model part must fill (tied weights are one tensor).
    names = {n for n, _ in shell.named_parameters()} | {n for n, _ in shell.named_buffers()
                                                          if n in shell.state_dict()}
    shapes = {n: t.shape for n, t in shell.state_dict().items() if n in names}
    weights = {n: torch.empty(s, dtype=torch.float32) for n, s in shapes.items()}
    with _one_process_is_meant():
        dcp.load({"model": weights}, checkpoint_id=str(checkpoint / SHARDED_DIR), no_dist=True)
    return weights


def consolidate(checkpoint: str | Path, out: str | Path) -> Path:
    """Write a sharded checkpoint as a Hugging Face folder at ``out`` (full weights in
    safetensors, config, generation config and tokenizer files), loadable with
    ``from_pretrained``. The DCP shards and training state are not copied."""
    from transformers import AutoConfig, AutoModelForCausalLM

    checkpoint, out = Path(checkpoint), Path(out)
    weights = sharded_weights(checkpoint)
    config = AutoConfig.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    found = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if found.unexpected_keys or set(found.missing_keys) - tied:
        raise ValueError(f"{checkpoint}: the shards do not match the model's config "
                         f"(missing {sorted(set(found.missing_keys) - tied)[:5]}, unexpected "
                         f"{found.unexpected_keys[:5]})")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for item in checkpoint.iterdir():
        if item.is_file() and item.name not in _SIDE_FILES and item.name not in {
                "config.json", "model.safetensors"}:
            shutil.copy2(item, out / item.name)  # tokenizer, generation config, meta
    return out
