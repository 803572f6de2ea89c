"""Publish a job's checkpoint as a named model: choose it, link its files, describe it.

A published model lives in ``<home>/published/<workspace>/<name>/``: the checkpoint's model
files (config, weights, tokenizer, ``adapter/`` for LoRA), hard-linked when the file system
allows and copied otherwise, so deleting the job never breaks the model. Optimizer and RNG
state are not taken: a published model is weights, not a resumable run.

Example:
    >>> pick_checkpoint([{"name": "checkpoint-2", "step": 2, "validation_reward": 0.5},
    ...                  {"name": "checkpoint-4", "step": 4, "validation_reward": 0.4}],
    ...                 "best")["step"]
    2
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from rltune.jobdir import CRITIC_STATE
from rltune.names import MODEL_NAME_PATTERN
from rltune.sdk.errors import ConflictError, NotFoundError, ValidationError

#: Model names: what ``model:`` of a job and ``model`` of a chat request carry.
NAME_PATTERN = MODEL_NAME_PATTERN
_NAME = re.compile(NAME_PATTERN)
#: Files of a checkpoint that are resume state, not model (never published).
_NOT_MODEL = {"training_state.pt", "rng_state.pt", CRITIC_STATE}
ADAPTER_DIR = "adapter"  # same folder name as rltune.trainer.lora.ADAPTER_DIR (no torch here)


def check_name(name: str, where: str = "name") -> str:
    if not _NAME.match(name or ""):
        raise ValidationError(f"model name {name!r} is not allowed", where=where,
                              hint="use 1-64 letters, digits, '.', '_' or '-', starting with a "
                                   "letter or digit")
    return name


def pick_checkpoint(ckpts: list[dict[str, Any]], which: Optional[str | int]) -> dict[str, Any]:
    """``which``: a step number, ``"best"`` (highest validation reward; the latest on ties and
    when no checkpoint was validated) or ``"last"``/None."""
    if not ckpts:
        raise NotFoundError("the job has no checkpoint", where="checkpoint",
                            hint="set save_strategy: steps (or epoch) and let it save one")
    which = "last" if which is None else str(which)
    if which == "last":
        return ckpts[-1]
    if which == "best":
        scored = [c for c in ckpts if c.get("validation_reward") is not None]
        if not scored:
            return ckpts[-1]
        return max(scored, key=lambda c: (c["validation_reward"], c["step"]))
    step = which.removeprefix("checkpoint-")
    if not step.isdigit():
        raise ValidationError(f"checkpoint {which!r} is not a step, 'best' or 'last'",
                              where="checkpoint", hint="e.g. --checkpoint 40, best or last")
    for c in ckpts:
        if c["step"] == int(step):
            return c
    raise NotFoundError(f"no checkpoint at step {step}", where="checkpoint",
                        hint="steps saved: " + ", ".join(str(c["step"]) for c in ckpts))


def _link_tree(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True)
    for item in src.iterdir():
        if item.name in _NOT_MODEL or item.is_symlink():
            continue
        if item.is_dir():
            _link_tree(item, dst / item.name)
            continue
        try:
            os.link(item, dst / item.name)
        except OSError:  # another file system, or links not allowed: copy
            shutil.copy2(item, dst / item.name)


def link_model_files(checkpoint: Path, target: Path) -> None:
    """Hard-link (or copy) a checkpoint's model files to ``target`` (written atomically); a
    sharded checkpoint's DCP shards are consolidated into full weights instead."""
    if target.exists():
        raise ConflictError(f"a model folder named {target.name!r} exists", where="name",
                            hint="choose another name or delete the model first")
    target.parent.mkdir(parents=True, exist_ok=True)
    # a private temporary folder: two publishes of one name never share it
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))
    try:
        if (checkpoint / "sharded" / ".metadata").is_file():  # checkpoint_format: sharded
            from rltune.trainer.parallel.sharded import consolidate

            consolidate(checkpoint, tmp / "m")  # the ranks' shards as one HF folder
        else:
            _link_tree(checkpoint, tmp / "m")
        try:
            (tmp / "m").rename(target)
        except OSError:  # another publish of the same name got there first
            raise ConflictError(f"model {target.name!r} exists", where="name",
                                hint="choose another name or delete the model first") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def describe(job: dict[str, Any], ckpt: dict[str, Any]) -> dict[str, Any]:
    """The facts a model record keeps about where it came from."""
    hp = ((job.get("config") or {}).get("training") or {}).get("hyper_parameters") or {}
    lora_rank = int(hp.get("lora_rank") or 0)
    return {"source_job": job["id"], "checkpoint": ckpt["name"], "step": ckpt["step"],
            "validation_reward": ckpt.get("validation_reward"), "base_model": job["model"],
            "kind": "lora" if lora_rank > 0 else "full", "lora_rank": lora_rank,
            "algorithm": job.get("algorithm")}


def has_adapter(model_dir: Path) -> bool:
    return (Path(model_dir) / ADAPTER_DIR / "adapter_config.json").is_file()
