"""TRL's ``GRPOTrainer`` / ``GRPOConfig`` names, backed by rltune.

A TRL GRPO script runs with its import changed from ``trl`` to ``rltune.trl``: the same
constructor arguments and config fields (each honoured, or all of those that cannot be named
in one error), ``train()``, ``save_model()`` and ``push_to_hub()``; underneath, rltune's
pipeline (policy gateway, reward functions in worker processes, its trainer). See
``docs/coming-from.md``.

Example:
    >>> from rltune.trl import GRPOConfig
    >>> GRPOConfig(output_dir="out", num_generations=4).hyper_parameters()["batch_size"]
    2
"""

from __future__ import annotations

from typing import Any

__all__ = ["GRPOConfig", "GRPOTrainer"]


def __getattr__(name: str) -> Any:  # the trainer (and transformers) load on first use
    if name == "GRPOConfig":
        from rltune.trl.config import GRPOConfig

        return GRPOConfig
    if name == "GRPOTrainer":
        from rltune.trl.trainer import GRPOTrainer

        return GRPOTrainer
    raise AttributeError(f"module 'rltune.trl' has no attribute {name!r}")
