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

import unicodedata
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Optional, get_args

from pydantic import AfterValidator, Field

#: Inference engines (``rltune.engine.select``).
ENGINES: tuple[str, ...] = ("builtin", "vllm")
#: Where built-in engine replicas run (``rltune.engine.select``).
REPLICA_BACKENDS: tuple[str, ...] = ("local", "ray")
#: Experiment trackers (``rltune.observability.trackers.base``).
TRACKERS: tuple[str, ...] = ("tensorboard", "wandb", "mlflow", "swanlab", "trackio")
#: Metric-name vocabularies a tracker can get (``observability.metric_names``).
METRIC_VOCABULARIES: tuple[str, ...] = ("rltune", "trl", "verl")
#: Tool-call parsers of the policy gateway (``rltune.gateway.toolcalls``).
TOOL_PARSERS: tuple[str, ...] = ("hermes", "llama3_json", "mistral", "qwen3_coder", "gpt_oss",
                                 "glm45", "deepseek_v3", "kimi_k2")
#: Advantage estimators: each has a learning-signal class (``rltune.trainer.signals.table``).
ADVANTAGE_ESTIMATORS: tuple[str, ...] = ("grpo", "opd", "gae")
#: Algorithm presets (``rltune.config.algorithm.PRESETS``). ``ppo`` trains a critic (GAE);
#: ``sft`` is supervised fine-tuning on ``messages`` rows (``rltune.trainer.sft``), ``dpo``
#: preference optimisation on (prompt, chosen, rejected) rows (``rltune.trainer.dpo``): neither
#: runs rollouts (``OFFLINE_ALGORITHMS``).
ALGORITHMS: tuple[str, ...] = ("gspo", "grpo", "dapo", "opd", "ppo", "sft", "dpo")
OFFLINE_ALGORITHMS: tuple[str, ...] = ("sft", "dpo")
#: DPO's losses (``rltune.trainer.losses.dpo_loss_B``).
DpoLossType = Literal["sigmoid", "ipo"]
#: Loss aggregation modes (``rltune.trainer.losses.aggregate_loss``). The three lists the loss
#: reads are declared as static ``Literal`` types (a type checker sees them in
#: ``AlgorithmKnobs`` and the loss functions); their tuples are read off the types.
LossAggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean"]
LOSS_AGG_MODES: tuple[str, ...] = get_args(LossAggMode)
#: KL estimators of the KL-to-reference term.
KLEstimator = Literal["k1", "k2", "k3"]
KL_ESTIMATORS: tuple[str, ...] = get_args(KLEstimator)
#: Where the importance ratio is taken.
ImportanceLevel = Literal["token", "sequence"]
IMPORTANCE_LEVELS: tuple[str, ...] = get_args(ImportanceLevel)

#: A job's statuses (``rltune.server.states``), in their order of life. STOPPED: ended early by
#: ``stop`` at a step boundary with a checkpoint (a finished run like SUCCEEDED, publishable and
#: resumable); CANCELED: killed where it was.
JOB_STATUSES: tuple[str, ...] = ("PENDING", "RUNNING", "SUCCEEDED", "STOPPED", "FAILED",
                                 "CANCELED")
#: The statuses a job stays in until someone acts (resume, delete): what clients wait for.
JOB_TERMINAL: tuple[str, ...] = ("SUCCEEDED", "STOPPED", "FAILED", "CANCELED")
#: General datasets rltune generates by code, for ``data_options.preset_dataset`` (Ark's
#: preset data injection; ``rltune.trainer.data_prep.PRESETS``).
PRESET_DATASETS: tuple[str, ...] = ("calculator", "general")

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


#: Unicode categories a name may not hold: controls (NUL, newlines, escapes), format
#: characters (bidi overrides, zero-width spaces and joiners), separators of lines and
#: paragraphs, surrogates, private-use and unassigned code points.
_NOT_PLAIN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def plain_text(value: str) -> str:
    """``value``, unless it holds a character of ``_NOT_PLAIN``: ``ValueError`` naming it.

    >>> plain_text("calc run 2")
    'calc run 2'
    >>> try:
    ...     plain_text("calc\u202egnp.exe")
    ... except ValueError as exc:
    ...     print(str(exc).split(":")[0])
    holds U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5
    """
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in _NOT_PLAIN:
            what = unicodedata.name(ch, "a control character")
            raise ValueError(f"holds U+{ord(ch):04X} ({what}) at character {i + 1}: use plain "
                             "text (no control, bidi or zero-width characters)")
    return value


#: A job's name (``name`` of a job, ``job_name`` of a submit or a copy).
JobName = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(plain_text)]
OptionalJobName = Optional[JobName]
