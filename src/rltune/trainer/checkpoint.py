"""Checkpoints: the model in Hugging Face format plus everything needed to resume exactly
(optimizer, LR schedule, RNG states, data order and the trainer's own counters).

Layout of ``<root>/checkpoint-<step>/``::

    config.json, model.safetensors, tokenizer files   (loadable with from_pretrained)
    adapter/            LoRA jobs only: the peft adapter (the weights above are merged)
    training_state.pt   optimizer + scheduler + updater step
    sharded/            ``checkpoint_format: sharded`` only: each rank's DCP shards of the
                        weights and optimizer state (``trainer/parallel/sharded.py``); the
                        folder then has no weights file and training_state.pt holds scheduler +
                        step only
    critic.pt           PPO jobs only: the critic's weights, optimizer and update count
    rng_state.pt        python / torch (and numpy if present) RNG states
    trainer_state.json  step, epoch, data-order state, metrics worth keeping

A checkpoint is written to a temporary folder and renamed, so a crash never leaves a
half-written ``checkpoint-N`` behind. ``save_total_limit`` keeps the newest N.

Example:
    >>> import tempfile
    >>> from rltune.trainer.testing import tiny_qwen2
    >>> root = tempfile.mkdtemp()
    >>> path = save_checkpoint(root, step=3, model=tiny_qwen2(), trainer_state={"epoch": 0})
    >>> path.name, latest_checkpoint(root) == path, read_trainer_state(path)["step"]
    ('checkpoint-3', True, 3)
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import torch

from rltune.jobdir import CRITIC_STATE, complete_checkpoints, read_trainer_state, trainer_state_file
from rltune.sdk.errors import ValidationError
from rltune.trainer.lora import is_lora, load_adapter, save_lora
from rltune.trainer.parallel.sharded import SHARDED_DIR, is_sharded, sharded_weights

if TYPE_CHECKING:
    from rltune.trainer.protocols import Stateful, Updater

#: Complete checkpoints under a checkpoints folder, oldest step first (``rltune.jobdir``).
list_checkpoints = complete_checkpoints
__all__ = ["latest_checkpoint", "list_checkpoints", "read_trainer_state",
           "restore_training_state", "save_checkpoint"]
#: The critic's state in a PPO job's checkpoint (``trainer/signals/critic.py``).
CRITIC_FILE = CRITIC_STATE


def latest_checkpoint(root: str | Path) -> Optional[Path]:
    found = list_checkpoints(root)
    return found[-1] if found else None


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:  # numpy is optional
        pass
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])


def save_checkpoint(
    root: str | Path,
    *,
    step: int,
    model: Any,
    tokenizer: Any = None,
    updater: Optional[Updater] = None,
    trainer_state: Optional[dict[str, Any]] = None,
    save_total_limit: Optional[int] = None,
    weights: Optional[dict[str, torch.Tensor]] = None,
    sharded: bool = False,
    critic: Optional[Stateful] = None,
) -> Path:
    """Write ``<root>/checkpoint-<step>`` and drop the oldest beyond ``save_total_limit``.

    ``updater`` is a ``PolicyUpdater`` (its optimizer and scheduler are saved);
    ``trainer_state`` is any JSON-able dict (put the sampler's ``state_dict()`` in it).
    ``weights``: the full weights to write instead of ``model``'s own (a sharded policy).
    ``sharded``: every rank of ``updater`` writes its shards of the weights and optimizer
    state instead (``trainer/parallel/sharded.py``); ``model`` then only gives its config.
    ``critic``: anything with ``state_dict()`` (PPO's critic), saved as ``critic.pt``.
    """
    if sharded and updater is None:
        raise ValueError("a sharded checkpoint is written by the updater's ranks: pass updater=")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"checkpoint-{step}"
    tmp = root / f".tmp-checkpoint-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    if sharded and updater is not None:
        updater.save_sharded(tmp / SHARDED_DIR)
        model.config.save_pretrained(tmp)
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(tmp)
    elif is_lora(model):
        save_lora(model, tmp)  # merged weights for from_pretrained + adapter/ for resume
    else:  # a sharded (data-parallel) policy gives its gathered full ``weights``
        model.save_pretrained(tmp, **({} if weights is None else {"state_dict": weights}))
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    if sharded and updater is not None:
        torch.save({**updater.schedule_state(), "sharded": True}, tmp / "training_state.pt")
    elif updater is not None:
        torch.save(updater.state_dict(), tmp / "training_state.pt")
    if critic is not None:
        torch.save(critic.state_dict(), tmp / CRITIC_FILE)
    torch.save(_rng_state(), tmp / "rng_state.pt")
    state = {**(trainer_state or {}), "step": step}
    trainer_state_file(tmp).write_text(json.dumps(state, indent=2, default=str))
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    if save_total_limit:
        for old in list_checkpoints(root)[:-save_total_limit]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def restore_training_state(path: str | Path, updater: Optional[Updater] = None, *,
                           rng: bool = True, critic: Optional[Stateful] = None
                           ) -> dict[str, Any]:
    """Load optimizer/scheduler into ``updater`` and the RNG states; return trainer_state.
    ``critic`` (PPO's) loads its ``critic.pt``.

    The model weights are loaded separately with ``from_pretrained(path)`` (they are a normal
    Hugging Face folder), before building the updater; a LoRA job loads ``adapter/`` into its
    wrapped base model instead (``trainer.lora.load_adapter``).
    """
    path = Path(path)
    state = read_trainer_state(path)
    if updater is not None:
        ts = path / "training_state.pt"
        if not ts.exists():
            raise ValidationError(f"{path} has no optimizer state", where=str(ts),
                                  hint="resume from a checkpoint saved with updater=")
        # on the CPU first: load_state_dict moves the state to each parameter's device
        saved = torch.load(ts, weights_only=False, map_location="cpu")
        if saved.get("sharded"):  # weights and optimizer from the shards, on any ranks
            updater.load_sharded(path / SHARDED_DIR)
            updater.load_schedule_state(saved)
        else:
            updater.load_state_dict(saved)
    if critic is not None:
        cs = path / CRITIC_FILE
        if not cs.exists():
            raise ValidationError(f"{path} has no critic state", where=str(cs),
                                  hint="resume a PPO job from a checkpoint of a PPO job")
        critic.load_state_dict(torch.load(cs, weights_only=False, map_location="cpu"))
    if rng and (path / "rng_state.pt").exists():
        _set_rng_state(torch.load(path / "rng_state.pt", weights_only=False, map_location="cpu"))
    return state


def restore_policy(model: Any, path: str | Path) -> None:
    """Load a checkpoint's weights into a running policy (any device and dtype).

    A LoRA policy loads its adapters exactly as saved (not re-derived from the merged
    weights); its base stays the job's original model, which is the KL reference.
    """
    if is_lora(model):
        load_adapter(model, Path(path))
        return
    if is_sharded(path):  # the shards load with the optimizer (restore_training_state)
        return
    model.load_state_dict(checkpoint_weights(path))


def checkpoint_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """A checkpoint's full weights (fp32, CPU), by parameter name."""
    from transformers import AutoModelForCausalLM

    if is_sharded(path):
        return sharded_weights(path)
    weights: dict[str, torch.Tensor] = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32).state_dict()
    return weights
