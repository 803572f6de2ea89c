"""The multi-step calculator task of ``agentic_compare.py --task multistep`` (issue 38 item 3).

The ``multistep`` template's job as shipped (``rltune/templates/multistep/job.yaml``: GSPO,
8 chains x 8 rollouts, its learning rate, ``max_length`` 448 and ``max_prompt_length`` 384, so
each model call writes at most 64 tokens, validation 64 held-out chains x 2 samples scored on
the exact answer) with the benchmark's changes only: its rollout calls the HTTP calculator
(``agentic_ws/functions/multistep.py``), ``max_steps``/``eval_steps``/seed are the benchmark's
and nothing is checkpointed. The rows are ``make_multistep_rows`` with the chains the demo
model learned (``recipe_for("nano", "multistep")``), as ``rltune init -t multistep`` writes
them; both sides train on the same ones.

Also here: the default model (``nano-multistep``, through rltune's registry), the tokens an
episode costs the engine against the tokens it adds (``token_use``), and the issue's three
targets over the report (``issue_targets``).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import yaml

HERE = Path(__file__).parent
PROMPT_KEY = "engine/prompt_tokens"
PREFILL_KEY = "engine/prefill_tokens"
VAL = "validation/data/reward/mean@1"
#: issue 38's targets: best async >= 1.5x sooner to the target than sync; rltune's step
#: <= 0.25x TRL's; prefill tokens per episode <= 1.3x the tokens the episode adds.
TARGETS = {"async_speedup_to_target": 1.5, "step_vs_trl": 0.25, "prefill_per_added": 1.3}


def template_hp() -> dict[str, Any]:
    """The template's hyper-parameters (``job.yaml``'s ``training.hyper_parameters``)."""
    from rltune.templates import TEMPLATES_DIR

    job = yaml.safe_load((TEMPLATES_DIR / "multistep" / "job.yaml").read_text())
    return dict(job["training"]["hyper_parameters"])


def spec_fields() -> dict[str, Any]:
    """The spec entries both sides read, from the template: lr, lengths, validation size."""
    hp = template_hp()
    return {"learning_rate": float(hp["learning_rate"]), "max_length": hp["max_length"],
            "max_prompt_length": hp["max_prompt_length"],
            "max_new_tokens": hp["max_length"] - hp["max_prompt_length"],
            "val_n_rollouts": hp["val_n_rollouts"], "val_rows": 64}


def default_model() -> str:
    """``nano-multistep`` through rltune's registry: the cached build, else built first (the
    build takes a while: ``make demo-agent``'s first half)."""
    from rltune.models.factory import META_FILE
    from rltune.models.registry import models_home, resolve_model

    if not (models_home() / "nano-multistep" / META_FILE).is_file():
        print("agentic_compare: building the nano-multistep demo model first (minutes; "
              "pass --model to use another)", file=sys.stderr, flush=True)
    return str(resolve_model("nano-multistep"))


def multistep_rows(steps: int, batch_size: int, val_rows: int) -> tuple[list[dict], list[dict]]:
    """Training rows (``steps x batch_size``) and held-out rows, as the template's workspace
    has them (``create_workspace``: the demo model's chains, seed 0)."""
    from rltune.models.multistep import make_multistep_rows
    from rltune.models.recipes import recipe_for

    chains = recipe_for("nano", "multistep").config.task
    return (make_multistep_rows(steps * batch_size, "train", seed=0, config=chains),
            make_multistep_rows(val_rows, "heldout", seed=0, config=chains))


def multistep_job(root: Path, spec: dict[str, Any], extra: dict) -> Path:
    """The template's workspace and job with the HTTP-calculator rollout (``extra``: the
    side's pipeline knobs)."""
    from rltune.models.tasks import write_jsonl
    from rltune.templates import create_workspace

    ws = create_workspace(root / "ws", "multistep", train_rows=1, val_rows=1)
    train, val = multistep_rows(spec["steps"], spec["batch_size"], spec["val_rows"])
    write_jsonl(train, ws / "data" / "train.jsonl")
    write_jsonl(val, ws / "data" / "val.jsonl")
    shutil.copytree(HERE / "agentic_ws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = spec["model"]
    rollout = job["functions"][0]
    rollout["fcmodel"]["classpath"] = "functions/multistep.py:MultiStepHttpRollout"
    rollout["runtime"]["env"] = {"TOOL_URL": spec["tool_url"]}
    hp = job["training"]["hyper_parameters"]
    for key in ("save_steps", "save_total_limit"):
        hp.pop(key, None)
    hp.update(max_steps=spec["steps"], eval_steps=spec["eval_steps"], seed=spec["seed"],
              save_strategy="no", **extra)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def _new_tokens(rows: list[list[int]], prompt: int) -> int:
    """Tokens an episode added to its context: each captured sequence's tokens past what the
    previous one (the first: the prompt) already held."""
    added, before = 0, None
    for ids in rows:
        if before is None:
            added += max(len(ids) - prompt, 0)
        else:
            same = next((i for i, (a, b) in enumerate(zip(ids, before, strict=False))
                         if a != b),
                        min(len(ids), len(before)))
            added += len(ids) - same
        before = ids
    return added


def token_use(job_dir: Path, ws: Path, metric_rows: list[dict],
              episodes_per_step: int) -> dict[str, Any]:
    """Per episode: its prompt, the tokens it added (sampled + the agent's: tool results,
    chat-template glue; from the trained episodes' trajectories), and what the engine was
    given (``engine/prompt_tokens``) and computed in prefill (``engine/prefill_tokens``).

    The engine's counts come per step window (each step's metrics hold them since the previous
    step's) and a validation falls into the window after its step, alongside, in the async
    modes, training rollouts sampled meanwhile; so ``*_per_episode`` divide the whole job's
    counts by every episode the engine ran in it: the trained ones and the metered
    validations' (all but the last, which runs after the last count; the validation rows x
    ``val_n_rollouts`` each). Validation groups are 2 samples, not 8, so they share their
    prompt less: this errs high. ``*_train_windows`` (synchronous jobs only): the windows
    without a validation over their steps' episodes, training alone; in the async modes a
    step's rollouts run partly in the windows that hold a validation, so there are none."""
    prompts, added, sampled = [], [], []
    for path in sorted((job_dir / "trajectories").glob("step_*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("status") != "success" or not rec.get("tokens"):
                continue
            prompts.append(rec["prompt_tokens"])
            sampled.append(rec["response_tokens"])
            added.append(_new_tokens([t["input_ids"] for t in rec["tokens"]],
                                     rec["prompt_tokens"]))
    out: dict[str, Any] = {"episodes_logged": len(added)}
    if not added:
        return out
    mean = statistics.mean
    out.update(prompt_per_episode=round(mean(prompts), 1), added_per_episode=round(mean(added), 1),
               sampled_per_episode=round(mean(sampled), 1))
    steps = {row["step"]: row["metrics"] for row in metric_rows}
    windows = [s for s in steps if PREFILL_KEY in steps[s]]
    if not windows:
        return out
    hp = yaml.safe_load((ws / "job.yaml").read_text())["training"]["hyper_parameters"]
    val_file = ws / "data" / "val.jsonl"
    per_val = (len(val_file.read_text().splitlines()) if val_file.is_file() else 0) \
        * int(hp.get("val_n_rollouts") or 1)
    metered_vals = [s for s in steps if VAL in steps[s] and s < max(windows)]
    episodes = episodes_per_step * len(windows) + per_val * len(metered_vals)
    clean = [s for s in windows if s >= 2 and s - 1 not in metered_vals
             and not hp.get("max_staleness")]  # async: rollouts run in the other windows too
    for name, key in (("engine_prompt", PROMPT_KEY), ("prefill", PREFILL_KEY)):
        out[f"{name}_per_episode"] = round(sum(steps[s][key] for s in windows) / episodes, 1)
        if clean:
            out[f"{name}_per_episode_train_windows"] = round(
                sum(steps[s][key] for s in clean) / (episodes_per_step * len(clean)), 1)
    out["prefill_per_added"] = round(out["prefill_per_episode"] / out["added_per_episode"], 3)
    if clean:
        out["prefill_per_added_train_windows"] = round(
            out["prefill_per_episode_train_windows"] / out["added_per_episode"], 3)
    out["engine_episodes"] = episodes
    return out


def issue_targets(sides: dict[str, dict[str, Any]], target: Optional[float] = None,
                  initials: Sequence[float] = ()) -> dict[str, Any]:
    """Issue 38's three targets over ``report()``'s sides: the best async time to the target
    vs sync, each rltune side's s/step vs TRL's, each side's prefill per token added (the
    worst rltune side's decides). A target validation no higher than a run's initial one is
    flagged: the time to it then measures no learning."""
    out: dict[str, Any] = {}
    if target is not None and initials and target <= max(initials):
        out["note"] = (f"target validation {target} is not above the initial validation "
                       f"({max(initials)}): the times to it measure no learning; pass --target")
    speed = {s: r["speedup_to_target_vs_sync"] for s, r in sides.items()
             if s not in ("sync", "trl") and r.get("speedup_to_target_vs_sync") is not None}
    if speed:
        best = max(speed, key=speed.get)
        out["async_speedup_to_target"] = _verdict(speed[best], "async_speedup_to_target",
                                                  higher=True, best=best, sides=speed)
    vs_trl = {s: r["step_vs_trl"] for s, r in sides.items() if "step_vs_trl" in r}
    if vs_trl:
        best = min(vs_trl, key=vs_trl.get)
        out["step_vs_trl"] = _verdict(vs_trl[best], "step_vs_trl", best=best, sides=vs_trl,
                                      all_met=all(v <= TARGETS["step_vs_trl"]
                                                  for v in vs_trl.values()))
    ratio = {s: r["tokens"]["prefill_per_added"]["mean"] for s, r in sides.items()
             if "prefill_per_added" in r.get("tokens", {})}
    rl = {s: v for s, v in ratio.items() if s != "trl"}
    if rl:
        worst = max(rl, key=rl.get)
        out["prefill_per_added"] = _verdict(rl[worst], "prefill_per_added", worst=worst,
                                            sides=ratio)
    return out


def _verdict(value: float, name: str, higher: bool = False, **extra: Any) -> dict[str, Any]:
    target = TARGETS[name]
    met = value >= target if higher else value <= target
    return {"value": value, "target": f"{'>=' if higher else '<='} {target}", "met": met,
            **extra}


def summarise_tokens(runs: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The token figures of a side's runs: mean, min and max of each over the repeats."""
    keys = sorted({k for r in runs for k, v in (r.get("tokens") or {}).items()
                   if isinstance(v, (int, float))
                   and k not in ("episodes_logged", "engine_episodes")})
    if not keys:
        return None
    out: dict[str, Any] = {}
    for key in keys:
        values = [r["tokens"][key] for r in runs if key in (r.get("tokens") or {})]
        out[key] = {"mean": round(statistics.mean(values), 3), "min": min(values),
                    "max": max(values)}
    return out
