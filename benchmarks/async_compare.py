"""Synchronous vs asynchronous pipeline on the calculator job (issue 17).

Trains the nano calculator agent (multi-turn rollouts through the function workers and the
policy gateway, GSPO, the learning test's hyper-parameters) three times from the same warm
start and data: ``max_staleness: 0`` (synchronous), ``max_staleness: 1`` and
``max_staleness: 1`` with ``partial_rollouts: true``. Validation runs every ``--eval-steps``.

Reported per run: the validation curve against the job's wall-clock (steps and validations:
every run validates equally often, and with partial rollouts the next step's rollouts keep
sampling during a validation, so leaving validation out would flatter the async runs), the
wall-clock to reach the target validation reward (``--target``; default: the lowest best
validation of the runs, so every run reaches it), the ratio synchronous / async, seconds per
step, and the time-weighted idle shares of the engine (no rollout running) and the trainer (no
update running) over the steps, from the ``fully_async/idle/*`` metrics.

    python benchmarks/async_compare.py --steps 20 [--model DIR] [--runs sync,async,partial]

Prints a JSON summary (and writes it to ``--out``). Runs one after another, never in parallel:
on 2 cores the runs would share them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import yaml

RUNS = {"sync": {"max_staleness": 0}, "async": {"max_staleness": 1},
        "partial": {"max_staleness": 1, "partial_rollouts": True}}
#: the pipeline modes of the agentic benchmark and the staleness sweep
PIPELINE_MODES = {"sync": {"max_staleness": 0}, "stale1": {"max_staleness": 1},
                  "stale2p": {"max_staleness": 2, "partial_rollouts": True}}
VAL = "validation/data/reward/mean@1"


def pipeline_knobs(mode: str, scale_lr_by_staleness: bool = False) -> dict[str, Any]:
    """A mode's pipeline keys; ``scale_lr_by_staleness`` goes to the async modes only (a
    synchronous job refuses it)."""
    knobs: dict[str, Any] = dict(PIPELINE_MODES[mode])
    if scale_lr_by_staleness and knobs["max_staleness"]:
        knobs["scale_lr_by_staleness"] = True
    return knobs


def make_job(root: Path, model_dir: str, steps: int, eval_steps: int, extra: dict) -> Path:
    """The calc template with the learning test's data and hyper-parameters."""
    from rltune.models.recipes import recipe_for
    from rltune.models.tasks import make_dataset_rows, write_jsonl
    from rltune.templates import TEMPLATES_DIR

    ws = root / "ws"
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    task = recipe_for("nano").config.task
    write_jsonl(make_dataset_rows(steps * 8, "train", seed=1, config=task),
                ws / "data" / "train.jsonl")
    write_jsonl(make_dataset_rows(80, "heldout", seed=0, config=task), ws / "data" / "val.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = model_dir
    job["training"]["hyper_parameters"] = {
        "algorithm": "gspo", "batch_size": 8, "n_rollouts": 8, "learning_rate": 2e-4,
        "ppo_mini_batch_size": 32, "kl_loss_coef": 0.0, "max_length": 256,
        "max_prompt_length": 200, "eval_steps": eval_steps, "val_n_rollouts": 4,
        "save_strategy": "no", "seed": 3, **extra,
    }
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def run_one(name: str, model_dir: str, steps: int, eval_steps: int) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    root = Path(tempfile.mkdtemp(prefix=f"async-{name}-"))
    ws = make_job(root, model_dir, steps, eval_steps, RUNS[name])
    job_dir = root / "job"
    t0 = time.perf_counter()
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir,
                            base_dir=ws).run()
    total = time.perf_counter() - t0
    rows = read_metrics(job_dir)
    curve, clock, steps_s, val_s = [], 0.0, 0.0, 0.0
    idle = {"engine": 0.0, "trainer": 0.0}
    for row in rows:
        m = row["metrics"]
        val_s += m.get("timing/s/validation", 0.0)
        if row["step"] == 0:  # the validation before training is not part of the race
            curve.append((0, 0.0, m.get(VAL)))
            continue
        steps_s += m["timing/s/step"]
        clock += m["timing/s/step"] + m.get("timing/s/validation", 0.0)
        for who in idle:
            idle[who] += m.get(f"fully_async/idle/{who}_s", 0.0)
        if VAL in m:
            curve.append((row["step"], round(clock, 2), m[VAL]))
    shutil.rmtree(root, ignore_errors=True)
    return {"run": name, "config": RUNS[name], "step_seconds": round(steps_s, 2),
            "job_seconds": round(clock, 2),
            "validation_seconds": round(val_s, 2), "total_seconds": round(total, 2),
            "curve": curve, "initial": summary["initial_validation"],
            "idle_share": {k: round(v / max(steps_s, 1e-9), 3) for k, v in idle.items()}}


def time_to(curve: list, target: float) -> Optional[float]:
    return next((t for step, t, v in curve if step and v is not None and v >= target), None)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--eval-steps", type=int, default=2)
    ap.add_argument("--model", default=os.environ.get("RLTUNE_TEST_NANO"),
                    help="nano model directory (default: $RLTUNE_TEST_NANO, else built)")
    ap.add_argument("--runs", default="sync,async,partial")
    ap.add_argument("--target", type=float, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    model = args.model
    if not model:
        from rltune.models import ensure_demo_model

        model = str(ensure_demo_model("nano", seed=0))
    results = []
    for name in args.runs.split(","):
        res = asyncio.run(run_one(name, model, args.steps, args.eval_steps))
        print(json.dumps(res), file=sys.stderr)
        results.append(res)
    best = [max(v for s, _, v in r["curve"] if s and v is not None) for r in results]
    target = args.target if args.target is not None else min(best)
    base = time_to(results[0]["curve"], target)
    for r in results:
        r["seconds_to_target"] = time_to(r["curve"], target)
        r["speedup_vs_first"] = (round(base / r["seconds_to_target"], 3)
                                 if base and r["seconds_to_target"] else None)
        r["seconds_per_step"] = round(r["step_seconds"] / args.steps, 2)
    report = {"cpu": cpu_model(), "cores": os.cpu_count(), "steps": args.steps,
              "target_validation": target, "runs": results}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
