"""Build the warm-started demo models over a grid of seeds, thread counts and CPU ISAs.

Usage:
    .venv/bin/python benchmarks/warmstart_robustness.py [--sizes nano small] [--seeds 0 1 2]
        [--threads 1 2] [--isas native avx2 sse mkl-compat] [--jobs 1] [--rl [gspo grpo dapo]]
        [--out table.md]

Each cell is one fresh process that builds the model from scratch into a temporary
RLTUNE_HOME with ``ensure_demo_model`` (so exactly what ``rltune models build-demo`` does):
``avx2`` runs it with ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` (an older ISA,
emulated), ``native`` with the CPU's own; ``sse`` and ``mkl-compat`` (see ``ISA_ENV``) give a
different summation order even on AVX2-only CPUs. A cell reaches its target when the build succeeds
(held-out accuracy in the band, sampled tool path right >= 90 %); a miss is a ``BuildError``,
recorded with its metrics. ``--rl`` then trains each built model with the learning tests
(``tests/trainer/test_learning.py``: GSPO 20 steps by default, GRPO and DAPO 10 steps when
named; same environment) and records their validation reward before and after. Prints one
JSON line per cell and a Markdown table for benchmarks/RESULTS.md, with the CPU model from
``lscpu``. Exit status 1 if any cell missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import product

# Each entry changes the kernels torch picks, and with them the order of floating-point sums.
# "avx2" is an older ISA only on AVX-512 / AMX CPUs (on an AVX2-only CPU it is the native one,
# bit for bit). "sse" drops to torch's non-vectorised kernels and SSE4 oneDNN / MKL code paths,
# and "mkl-compat" asks MKL for its conditional-numerical-reproducibility code path: both give
# different sums from "native" on the AVX2-only AMD EPYC we checked (outputs hashed).
ISA_ENV = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "sse": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "mkl-compat": {"MKL_CBWR": "COMPATIBLE"},
}

_CELL = r"""
import json, sys, time
from rltune.models.factory import read_meta
from rltune.models.registry import ensure_demo_model
from rltune.models.recipes import recipe_for
from rltune.sdk.errors import BuildError
size, seed, threads, home = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
import dataclasses, rltune.models.recipes as R
r = recipe_for(size)
R.RECIPES[size] = dataclasses.replace(r, config=dataclasses.replace(r.config, threads=threads))
t0 = time.perf_counter()
try:
    meta = read_meta(ensure_demo_model(size, seed=seed, home=home))
    out = {"ok": True, "stop": meta["stop_reason"], "steps": meta["steps"],
           "metrics": meta["heldout_metrics"], "threads": meta["torch_threads"]}
except BuildError as exc:
    out = {"ok": False, "stop": "failed", "error": str(exc), "metrics": exc.metrics}
out["seconds"] = round(time.perf_counter() - t0, 1)
print("CELL " + json.dumps(out))
"""


def cpu_model() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for line in text.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


LEARNING_TESTS = {
    "gspo": "tests/trainer/test_learning.py::test_gspo_raises_validation_reward_by_0_2",
    "grpo": "tests/trainer/test_learning.py::test_grpo_and_dapo_improve[grpo]",
    "dapo": "tests/trainer/test_learning.py::test_grpo_and_dapo_improve[dapo]",
}


def run_cell(size: str, seed: int, threads: int, isa: str, rl: tuple[str, ...] = ()) -> dict:
    env = {**os.environ, **ISA_ENV[isa], "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.run(
            [sys.executable, "-c", _CELL, size, str(seed), str(threads), home],
            env=env, capture_output=True, text=True,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("CELL ")), None)
        if line is None:
            cell = {"ok": False, "stop": "crashed", "error": proc.stderr[-2000:], "metrics": {}}
        else:
            cell = json.loads(line[5:])
        if rl and cell["ok"]:
            model = os.path.join(home, "models", size if seed == 0 else f"{size}-seed{seed}")
            cell["rl"] = {algo: run_learning(algo, model, env) for algo in rl}
    return {"size": size, "seed": seed, "threads": threads, "isa": isa, **cell}


def run_learning(algo: str, model_dir: str, env: dict) -> dict:
    """One learning test on ``model_dir``: its validation before, after, and verdict."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.perf_counter()
    proc = subprocess.run(
        # -m "": GRPO and DAPO are in the slow tier, which pyproject's addopts deselect.
        # --timeout 0: the suite's 600 s cap is for CI's nano; `small` on 1 thread takes longer.
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-m", "",
         "--timeout", "0", LEARNING_TESTS[algo]],
        env={**env, "RLTUNE_TEST_NANO": model_dir}, cwd=root, capture_output=True, text=True,
    )
    out = {"passed": proc.returncode == 0, "seconds": round(time.perf_counter() - t0, 1)}
    for line in proc.stdout.splitlines():  # "gspo 0.47 [(10, 0.85), (20, 0.92)]"
        if line.startswith(f"{algo} "):
            first, _, rest = line[len(algo) + 1:].partition(" ")
            out["before"] = round(float(first), 3)
            out["after"] = round(float(rest.rsplit(",", 1)[-1].strip(" )]")), 3)
    if "before" not in out:  # the test did not train (not collected, crashed): say why
        out["passed"] = False
        out["error"] = ((proc.stdout + proc.stderr).strip().splitlines() or ["no output"])[-1]
    return out


def table(cells: list[dict], cpu: str) -> str:
    rows = [
        f"CPU: {cpu}. One fresh process per cell, sizes built one after another "
        f"(`--jobs` at a time).",
        "",
        "| size | seed | threads | ISA | stop | steps | held-out acc | tool rate "
        "| tool acc (sampled) | s | RL from it: validation before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        m = c.get("metrics") or {}

        def f(k: str, m: dict = m) -> str:
            return "-" if k not in m else f"{m[k]:.2f}"

        rl = "; ".join(
            f"{algo} {r.get('before', '?')} → {r.get('after', '?')} "
            f"({'pass' if r['passed'] else 'FAIL'}{': ' + r['error'] if 'error' in r else ''})"
            for algo, r in (c.get("rl") or {}).items()
        ) or "-"
        rows.append(
            f"| {c['size']} | {c['seed']} | {c['threads']} | {c['isa']} | {c['stop']} "
            f"| {c.get('steps', '-')} | {f('accuracy')} | {f('tool_rate')} "
            f"| {f('tool_accuracy')} | {c.get('seconds', '-')} | {rl} |"
        )
    ok = sum(c["ok"] for c in cells)
    rows += ["", f"{ok} of {len(cells)} cells reached the target."]
    tried = [r for c in cells for r in (c.get("rl") or {}).values()]
    if tried:
        good = sum(r["passed"] for r in tried)
        rows.append(f"{good} of {len(tried)} learning-test runs from them passed.")
    return "\n".join(rows) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", nargs="+", default=["nano", "small"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--isas", nargs="+", choices=sorted(ISA_ENV), default=["native", "avx2"])
    p.add_argument("--jobs", type=int, default=1, help="cells run at once (1 = quiet timing)")
    p.add_argument("--rl", nargs="*", choices=sorted(LEARNING_TESTS), default=None,
                   help="run these learning tests from each cell (bare --rl: gspo)")
    p.add_argument("--out", help="also write the Markdown table here")
    args = p.parse_args()
    cpu = cpu_model()
    grid = list(product(args.sizes, args.seeds, args.threads, args.isas))
    print(f"{len(grid)} cells on {cpu}", flush=True)
    t0 = time.perf_counter()
    cells = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rl = () if args.rl is None else tuple(args.rl or ["gspo"])
        for cell in pool.map(lambda g: run_cell(*g, rl=rl), grid):
            cells.append(cell)
            print(json.dumps(cell), flush=True)
    text = table(cells, cpu)
    print(text + f"\nwall {time.perf_counter() - t0:.0f} s")
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    rl_ok = all(r["passed"] for c in cells for r in (c.get("rl") or {}).values())
    return 0 if all(c["ok"] for c in cells) and rl_ok else 1


if __name__ == "__main__":
    sys.exit(main())
