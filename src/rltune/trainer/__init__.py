"""rltune.trainer: the step loop's building blocks.

* ``advantages`` / ``losses``: pure torch functions of the PPO-clip core (GRPO, GSPO, DAPO, OPD)
* ``logprobs``: per-token log-probs of padded rows under a causal LM
* ``update``: ``PolicyUpdater`` (mini-batches, AdamW, clipping, schedule, ``actor/*`` metrics)
* ``optim``: optimizer and LR schedule; ``checkpoint``: HF-format checkpoints + exact resume

Importing this package does not import torch (the CLI and server import it); the names below
load their module on first use.

Example:
    >>> import rltune.trainer as t
    >>> t.TrainingRow([1, 2], [0, 1], 1.0, "r0").rollout_id
    'r0'
"""

from __future__ import annotations

from rltune._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    ".update": ("PolicyUpdater", "TrainingRow", "frozen_copy"),
    ".checkpoint": ("save_checkpoint", "restore_training_state", "latest_checkpoint",
                    "list_checkpoints"),
    "rltune.jobdir": ("read_trainer_state",),
})
