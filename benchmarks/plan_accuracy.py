"""``rltune plan`` against the measured first 10 steps of the same job (issue 28).

The job is the ``calc`` template as ``rltune init workspace`` writes it (GSPO, 8 prompts x 8
rollouts, ``ppo_mini_batch_size`` 32, ``max_length`` 256) on a built model. Each round runs, as
a user would, ``rltune plan -c job.yaml --json`` (its calibration steps) and then ``rltune
train`` with ``max_steps: 10``, and compares the plan's seconds per step with the mean
``timing/s/step`` of the 10 trained steps. Rounds repeat ``--repeats`` times; the table has each
round and the median ratio.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/plan_accuracy.py \\
        --model $RLTUNE_HOME/models/nano --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*RLTUNE, *args], capture_output=True, text=True, check=False)


def one_round(model: Path, work: Path, steps: int) -> dict:
    ws = work / "agent"
    res = cli("init", "workspace", str(ws))
    assert res.returncode == 0, res.stderr
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    t0 = time.monotonic()
    res = cli("plan", "-c", str(ws / "job.yaml"), "--json")
    plan_wall = time.monotonic() - t0
    assert res.returncode in (0, 1), res.stderr[-2000:]
    report = json.loads(res.stdout)
    job["training"]["hyper_parameters"]["max_steps"] = steps
    (ws / "job10.yaml").write_text(yaml.safe_dump(job))
    out = work / "run"
    res = cli("train", "-c", str(ws / "job10.yaml"), "-O", str(out))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    measured = [r["metrics"]["timing/s/step"] for r in rows
                if r["step"] > 0 and "timing/s/step" in r["metrics"]]
    return {"plan": report["estimate"]["seconds_per_step"],
            "calibration": report["measured_seconds_per_step"], "plan_wall_s": plan_wall,
            "measured": measured, "cpu": report["cpu"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="a built model folder (nano)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rounds = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="rltune-plan-bench-") as tmp:
            r = one_round(args.model, Path(tmp), args.steps)
        mean = statistics.mean(r["measured"])
        r["ratio"] = r["plan"] / mean
        rounds.append(r)
        print(f"round {i + 1}: plan {r['plan']:.2f} s/step (calibration "
              f"{', '.join(f'{x:.1f}' for x in r['calibration'])}), measured "
              f"{mean:.2f} s/step over {len(r['measured'])} steps "
              f"({', '.join(f'{x:.1f}' for x in r['measured'])}), ratio {r['ratio']:.2f}",
              flush=True)
    print(f"CPU: {rounds[0]['cpu']}; load average now {os.getloadavg()[0]:.1f}")
    print("| round | plan s/step | measured s/step (mean of steps 1-10) | plan / measured |")
    print("|---|---|---|---|")
    for i, r in enumerate(rounds, 1):
        print(f"| {i} | {r['plan']:.2f} | {statistics.mean(r['measured']):.2f} | "
              f"{r['ratio']:.2f} |")
    ratios = [r["ratio"] for r in rounds]
    print(f"median ratio {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max "
          f"{max(ratios):.2f})")


if __name__ == "__main__":
    main()
