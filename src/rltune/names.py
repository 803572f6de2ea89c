"""Every name list rltune accepts in a job, declared once (no torch, nothing of rltune).

The job config's ``Literal`` types are built from these tuples (:func:`literal`), and each
registry that implements the names checks at import that its keys are exactly the list
(:func:`check_registry`): adding an engine, tracker, tool-call parser or advantage estimator
means adding its name here and its entry in the registry, and a missing half fails at import.

Example:
    >>> from rltune.names import ENGINES, literal
    >>> ENGINES
    ('builtin', 'vllm')
    >>> literal(ENGINES).__args__
    ('builtin', 'vllm')
    >>> check_registry("engine", ENGINES, {"builtin": 1})
    Traceback (most recent call last):
    ...
    RuntimeError: engine registry does not match rltune.names: missing vllm
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

#: Inference engines (``rltune.engine.select``).
ENGINES: tuple[str, ...] = ("builtin", "vllm")
#: Where built-in engine replicas run (``rltune.engine.select``).
REPLICA_BACKENDS: tuple[str, ...] = ("local", "ray")
#: Experiment trackers (``rltune.observability.trackers.base``).
TRACKERS: tuple[str, ...] = ("tensorboard", "wandb", "mlflow", "swanlab", "trackio")
#: Metric-name vocabularies a tracker can get (``observability.metric_names``).
METRIC_VOCABULARIES: tuple[str, ...] = ("rltune", "trl", "verl")
#: Tool-call parsers of the policy gateway (``rltune.gateway.toolcalls``).
TOOL_PARSERS: tuple[str, ...] = ("hermes", "llama3_json", "mistral", "qwen3_coder")
#: Advantage estimators: each has a learning-signal class (``rltune.trainer.signals``).
ADVANTAGE_ESTIMATORS: tuple[str, ...] = ("grpo", "opd", "gae")
#: Algorithm presets (``rltune.config.algorithm.PRESETS``). ``ppo`` trains a critic (GAE);
#: ``sft`` is supervised fine-tuning on ``messages`` rows (``rltune.trainer.sft``), no rollouts.
ALGORITHMS: tuple[str, ...] = ("gspo", "grpo", "dapo", "opd", "ppo", "sft")
#: Loss aggregation modes (``rltune.trainer.losses.aggregate_loss``).
LOSS_AGG_MODES: tuple[str, ...] = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                   "seq-mean")
#: KL estimators of the KL-to-reference term.
KL_ESTIMATORS: tuple[str, ...] = ("k1", "k2", "k3")
#: Where the importance ratio is taken.
IMPORTANCE_LEVELS: tuple[str, ...] = ("token", "sequence")

#: A job's statuses (``rltune.server.states``), in their order of life. STOPPED: ended early by
#: ``stop`` at a step boundary with a checkpoint (a finished run like SUCCEEDED, publishable and
#: resumable); CANCELED: killed where it was.
JOB_STATUSES: tuple[str, ...] = ("PENDING", "RUNNING", "SUCCEEDED", "STOPPED", "FAILED",
                                 "CANCELED")
#: The statuses a job stays in until someone acts (resume, delete): what clients wait for.
JOB_TERMINAL: tuple[str, ...] = ("SUCCEEDED", "STOPPED", "FAILED", "CANCELED")
#: General datasets rltune generates by code, for ``data_options.preset_dataset`` (Ark's
#: preset data injection; ``rltune.trainer.presets``).
PRESET_DATASETS: tuple[str, ...] = ("calculator",)

#: Model names: what ``model:`` of a job, ``tuned_model_name`` and a chat request carry.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


def literal(names: tuple[str, ...]) -> Any:
    """``Literal[names...]`` for a pydantic field (``Literal[*names]`` needs Python 3.11)."""
    return Literal.__getitem__(names)  # type: ignore[attr-defined]


def check_registry(what: str, names: tuple[str, ...], keys: Iterable[str]) -> None:
    """Raise unless ``keys`` (a registry's) are exactly ``names``: called at import by each
    registry, so the declared list and the implementations cannot drift apart."""
    have = set(keys)
    missing = [n for n in names if n not in have]
    extra = sorted(have - set(names))
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"not declared {', '.join(extra)}"] if extra else [])
        raise RuntimeError(f"{what} registry does not match rltune.names: {'; '.join(parts)}")
