"""Build the warm-started demo models from scratch and report time and accuracy.

Usage: .venv/bin/python benchmarks/build_models.py [nano] [small] [--seed 0]

Each size is built into a fresh temporary RLTUNE_HOME (the real ~/.rltune is not touched),
with 2 torch threads, and one JSON line per size is printed: build seconds, steps, held-out
sampled accuracy (overall, with and without the tool), stop reason. Numbers go to
benchmarks/RESULTS.md, section "Tiny-model kit".
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", default=["nano"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from rltune.models.factory import read_meta
    from rltune.models.registry import ensure_demo_model

    for size in args.sizes:
        with tempfile.TemporaryDirectory() as home:
            t0 = time.perf_counter()

            def show(ev: dict, t0: float = t0) -> None:
                if ev["phase"] == "eval":
                    keys = ("step", "loss", "accuracy", "tool_rate", "tool_accuracy")
                    row = {k: round(ev[k], 3) for k in keys}
                    print(f"  {time.perf_counter() - t0:6.1f}s {row}", flush=True)

            path = ensure_demo_model(size, seed=args.seed, home=home, progress=show)
            wall = time.perf_counter() - t0
            meta = read_meta(path) or {}
            m = meta.get("heldout_metrics", {})
            print(
                json.dumps(
                    {
                        "size": size,
                        "seed": args.seed,
                        "params": meta.get("parameters"),
                        "wall_s": round(wall, 1),
                        "train_s": meta.get("train_seconds"),
                        "steps": meta.get("steps"),
                        "stop": meta.get("stop_reason"),
                        "reached_band": meta.get("reached_band"),
                        "band": meta.get("target_band"),
                        "accuracy": m.get("accuracy"),
                        "tool_rate": m.get("tool_rate"),
                        "tool_accuracy": m.get("tool_accuracy"),
                        "direct_accuracy": m.get("direct_accuracy"),
                        "bf16": meta.get("bf16_autocast"),
                        "load_avg_1m": os.getloadavg()[0],
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
