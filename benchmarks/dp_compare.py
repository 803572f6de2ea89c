"""Step time of the calculator job with 1 vs 2 trainer ranks on the CPU (issue 13).

Trains the nano calculator agent (the ``calc`` template: multi-turn rollouts through the
function workers and the policy gateway, GSPO, 8 questions x 8 rollouts, no KL term) for
``--steps`` steps with ``n_gpus_training: 1`` and then ``n_gpus_training: 2`` (two gloo ranks
with FSDP2, ``trainer/parallel/ranks.py``), one run after the other, same data and seed, through
``rltune train``. No validation and no checkpoints, so a step is rollouts + update + weight
sync.

Reported per run, from the job's metrics: the mean ``timing/s/update`` (the update: old
log-probs, forward/backward, optimizer) and ``timing/s/step`` (the whole step) over the steps
that updated, step 1 left out (first-touch allocation, rank warm-up); and the speed-up
``seconds with 1 rank / seconds with 2 ranks`` (above 1: two ranks are faster), and each
run's update seconds per rollout second (the rollouts are the same work in both runs, so this
is less moved by other load on a shared machine).

    python benchmarks/dp_compare.py [--steps 4] [--model DIR] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def make_job(root: Path, model_dir: str, steps: int, ranks: int) -> Path:
    from rltune.templates import create_workspace

    ws = create_workspace(root / f"ws{ranks}", train_rows=steps * 8, val_rows=1)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = model_dir
    job["datasets"] = [d for d in job["datasets"] if d["type"] == "training"]
    hp = job["training"]["hyper_parameters"]
    hp.pop("n_epochs", None)
    hp.pop("stop_at_validation_reward", None)  # the template's; this job has no validation
    hp.update({"max_steps": steps, "save_strategy": "no", "kl_loss_coef": 0.0, "seed": 1,
               "n_gpus_training": ranks})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def timed_train(ws: Path, out: Path, *extra: str) -> dict[str, Any]:
    """``rltune train`` of ``ws`` into ``out``: the mean timings over the steps that updated
    (step 1 left out), the wall clock, and the job's log."""
    from rltune.trainer.sink import read_metrics

    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rltune.cli.main", "train", "-c",
                           str(ws / "job.yaml"), "-O", str(out), "-q", *extra],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    updated = [r["metrics"] for r in read_metrics(out)
               if r["step"] >= 2 and "timing/s/update" in r["metrics"]]

    def mean(key: str) -> float:
        return sum(m[key] for m in updated) / max(1, len(updated))

    return {"steps_measured": len(updated), "update_s": mean("timing/s/update"),
            "step_s": mean("timing/s/step"), "rollout_s": mean("timing/s/rollout"),
            "sync_s": mean("timing/s/sync"), "wall_s": wall,
            "log": (out / "train.log").read_text()}


def run(root: Path, model_dir: str, steps: int, ranks: int) -> dict[str, Any]:
    ws = make_job(root, model_dir, steps, ranks)
    timings = timed_train(ws, root / f"job{ranks}")
    del timings["log"]
    return {"ranks": ranks, **timings}


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except Exception:
        return platform.processor()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--model", default=os.environ.get("RLTUNE_TEST_NANO", "nano"))
    p.add_argument("--out", default=None)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [run(Path(tmp), a.model, a.steps, ranks) for ranks in (1, 2)]
    one, two = runs
    summary = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_avg": os.getloadavg(),
        "runs": runs,
        "speedup_update": one["update_s"] / two["update_s"],
        "speedup_step": one["step_s"] / two["step_s"],
        # The rollouts are the same work in both runs: on a shared box, the update's time
        # relative to them is less moved by the other load than the seconds themselves.
        "update_per_rollout_s": [r["update_s"] / r["rollout_s"] for r in runs],
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
