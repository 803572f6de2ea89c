"""A plan before the job: the estimate from a short calibration, and the settings that cannot
work here (torch-free; ``rltune plan`` runs the calibration, ``cli/plan_cmd.py``). The lengths
are fitted to the model's context before, as for every run (``rltune.config.lengths``).

The checks: the seed's hyper-parameter anti-patterns (``anti_patterns``: an SFT learning
rate, or above 5e-4 on a model of under 10M parameters; ``n_epochs`` >= 10; ``kl_loss_coef:
0`` outside DAPO; ``n_rollouts: 1``; a ``max_length`` far above the rollouts' length), also
printed by ``rltune train`` and the job server;

* function capacity beyond this machine's cores (each instance is a process);
* the seed's concurrency sizing: ``concurrency x capacity >= batch_size x n_rollouts /
  seconds per step x 1.2`` for the rollout function (seed 001, "并发估算公式");
* a validation set too small to see a 0.05 change of the mean@1 reward: the smallest
  difference two validations can tell apart at 95 % is ``1.96 x sqrt(2 x 0.25 / n)`` with
  ``n`` = validation rows x ``val_n_rollouts`` (a reward in [0, 1] has variance <= 0.25).

Example:
    >>> estimate(step_seconds=[6.0, 4.0], total_steps=10, tokens_per_step=1000,
    ...          val_seconds=2.0, validations=2, peak_memory_gb=1.5)["total_seconds"]
    54.0
    >>> round(detectable_change(256), 3)
    0.087
"""

from __future__ import annotations

import math
from typing import Any, Optional

#: The change of the validation reward a plan wants a validation set to detect.
MIN_VISIBLE_CHANGE = 0.05


def detectable_change(n: int) -> float:
    """The smallest mean@1 difference two validations of ``n`` scored rollouts tell apart."""
    return 1.96 * math.sqrt(2 * 0.25 / max(1, n))


def estimate(*, step_seconds: list[float], total_steps: int, tokens_per_step: float,
             val_seconds: float, validations: int, peak_memory_gb: Optional[float]
             ) -> dict[str, Any]:
    """The job's estimate from the calibration steps' seconds (their mean)."""
    per_step = sum(step_seconds) / len(step_seconds)
    total = per_step * total_steps + val_seconds * validations
    return {"seconds_per_step": round(per_step, 3), "total_steps": total_steps,
            "total_seconds": round(total, 1), "validations": validations,
            "tokens_per_step": round(tokens_per_step), "total_tokens":
            round(tokens_per_step * total_steps), "peak_memory_gb": peak_memory_gb}


def warnings(job: Any, *, seconds_per_step: Optional[float], cores: int,
             val_rows: int, mean_tokens: Optional[float] = None) -> list[str]:
    """What cannot work (or will not tell anything) here; each names the key and a fix."""
    hp = job.hyper_parameters
    out = anti_patterns(job, mean_tokens=mean_tokens,
                        parameters=model_parameters(job.model.name or ""))
    capacity = sum((fn.runtime.max_capacity or fn.runtime.capacity or 1) if fn.runtime else 1
                   for fn in job.functions)
    if capacity > cores:
        out.append(f"the functions ask for up to {capacity} instances (max_capacity summed) "
                   f"but this machine has {cores} cores: lower runtime.max_capacity")
    if seconds_per_step:
        need = hp.batch_size * hp.n_rollouts / seconds_per_step * 1.2
        for fn in job.functions:
            if getattr(fn.type, "value", fn.type) != "rollout":
                continue
            rt = fn.runtime
            have = ((rt.concurrency or 1) * (rt.capacity or 1)) if rt else 1
            if have < need:
                out.append(f"functions[{fn.name}]: concurrency x capacity = {have} is below "
                           f"batch_size x n_rollouts / {seconds_per_step:.1f} s per step x 1.2 "
                           f"= {need:.0f} (the seed's concurrency sizing): raise "
                           "runtime.concurrency or runtime.capacity")
    if val_rows:
        n = val_rows * hp.val_n_rollouts
        change = detectable_change(n)
        if change > MIN_VISIBLE_CHANGE:
            rows = math.ceil(2 * 0.25 * (1.96 / MIN_VISIBLE_CHANGE) ** 2 / hp.val_n_rollouts)
            out.append(f"the validation set ({val_rows} rows x val_n_rollouts "
                       f"{hp.val_n_rollouts}) can only see changes of {change:.2f} or more, "
                       f"not {MIN_VISIBLE_CHANGE}: use about {rows} rows or raise "
                       "val_n_rollouts")
    return out


#: Above it, a full fine-tune's learning rate is an SFT one (the seed's 5e-5 diverges in RL).
RL_MAX_LEARNING_RATE = 1e-5
#: Models with fewer parameters than this (rltune's demo models, ~1-4M) are not the LLMs the
#: seed's bound is for: they learn in RL at 1e-4 to 4e-4 and collapsed at 6e-4 and 1e-3
#: (benchmarks/RESULTS.md, `make demo-agent`), so their bound is ``TINY_MAX_LEARNING_RATE``.
TINY_PARAMETERS = 10_000_000
TINY_MAX_LEARNING_RATE = 5e-4


def model_parameters(spec: str, *, home: Any = None, workspace: str = "default"
                     ) -> Optional[int]:
    """The parameter count of the model ``spec`` names, when it is here (torch-free): the
    count a demo build recorded, else an estimate from its ``config.json``; None for a model
    not here (a hub id not cached, a demo model not built) or a config without the sizes."""
    import json

    from rltune.paths import check_model
    from rltune.sdk.errors import RltuneError

    try:
        path = check_model(spec, home, workspace=workspace).path
    except RltuneError:
        return None
    if path is None:
        return None
    try:
        built = json.loads((path / "rltune_model.json").read_text())
        return int(built["parameters"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        cfg = json.loads((path / "config.json").read_text())
        h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
        mlp = cfg.get("intermediate_size") or 4 * h
        embeddings = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2)
        return int(layers * (4 * h * h + 3 * h * mlp) + embeddings)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def anti_patterns(job: Any, *, mean_tokens: Optional[float] = None,
                  parameters: Optional[int] = None) -> list[str]:
    """The seed's hyper-parameter anti-patterns in ``job``, each naming the key and a fix;
    ``mean_tokens``: the calibration's mean tokens per rollout, when known; ``parameters``:
    the model's parameter count, when known (``model_parameters``)."""
    hp, out = job.hyper_parameters, []
    if hp.algorithm == "sft":
        return out
    from rltune.paths import DEMO_SIZES, DEMO_TASK_MODELS  # all under 5M parameters

    tiny = (parameters is not None and parameters < TINY_PARAMETERS) or (
        job.model.name in DEMO_SIZES + DEMO_TASK_MODELS)
    bound = TINY_MAX_LEARNING_RATE if tiny else RL_MAX_LEARNING_RATE
    if hp.lora_rank == 0 and hp.learning_rate > bound:
        if tiny:
            out.append(f"learning_rate {hp.learning_rate:g} is above {bound:g}, where "
                       f"models of under {TINY_PARAMETERS // 1_000_000}M parameters, as this "
                       f"one, collapsed in RL here; use 1e-4 to {bound:g}")
        else:
            out.append(f"learning_rate {hp.learning_rate:g} is an SFT learning rate: RL is "
                       "about ten times more sensitive and diverges; use 1e-6 to "
                       f"{bound:g}")
    if hp.max_steps is None and hp.n_epochs >= 10:
        out.append(f"n_epochs {hp.n_epochs}: RL does not need many passes, and they collapse "
                   "the validation reward (doctor P6); use 1-3")
    if hp.kl_loss_coef == 0 and job.knobs.algorithm != "dapo" and hp.algorithm != "opd":
        out.append("kl_loss_coef 0 outside DAPO: the policy drifts fast and its output can "
                   "turn to garbage; keep 0.001-0.01, or use algorithm: dapo")
    if hp.n_rollouts == 1:
        out.append("n_rollouts 1: no group to compare within, so the group-relative advantage "
                   "is lost (plain policy gradient); use 4-16")
    if hp.max_length >= 32768 or (mean_tokens and hp.max_length > 8 * mean_tokens):
        seen = f" (the rollouts average {mean_tokens:.0f} tokens)" if mean_tokens else ""
        out.append(f"max_length {hp.max_length} is far above what the data needs{seen}: "
                   "memory and rollout time grow with it; set it just above the longest "
                   "prompt + answer")
    return out
