"""Policy gateway throughput with one engine vs two engine replicas, in one run.

Modes (same model, same prompts, same total CPU threads for the engines):

* ``1x2``: one built-in engine, 2 torch threads (the default job);
* ``2x1-local``: two built-in engines in the gateway's process (``inference_replicas: 2``),
  1 thread each;
* ``2x1-ray``: two engine actors on a local 2-node Ray cluster on 127.0.0.1 (1 CPU per node,
  ``inference_replica_backend: ray``), 1 thread each.

For each mode and concurrency c, 64 chat requests (exactly 32 sampled tokens each) go through
the real gateway over HTTP with c in flight; the load generator runs in another process, as
rollouts do (``gateway_throughput.client_process_run``). Modes are interleaved over
``--repeats`` rounds; the table has the medians and the ratio to ``1x2``.

    .venv/bin/python benchmarks/replicas_compare.py --model /work/shared_models/nano
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from gateway_throughput import client_process_run

MODES = ("1x2", "2x1-local", "2x1-ray")


async def measure(mode: str, model: Path, cluster, pool, concurrencies) -> dict[int, float]:
    from rltune.engine.select import build_engine
    from rltune.gateway import Gateway

    replicas, threads = (1, 2) if mode == "1x2" else (2, 1)
    backend = "ray" if mode.endswith("ray") else "local"
    engine = build_engine("builtin", model, model_name="m", threads=threads, max_batch_size=64,
                          replicas=replicas, replica_backend=backend,
                          ray_address=cluster.address if cluster else None)
    gw = await Gateway.start(engine, static_keys=("bench",))
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(pool, client_process_run, gw.base_url, 8)  # warm-up
        return {c: await loop.run_in_executor(pool, client_process_run, gw.base_url, c)
                for c in concurrencies}
    finally:
        await gw.stop(close_engine=True)


async def main(model: Path, repeats: int, modes: list[str], concurrencies: list[int]) -> None:
    cluster = None
    if any(m.endswith("ray") for m in modes):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from ray_cluster import LocalRayCluster

        cluster = LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1).start()
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    results: dict[str, dict[int, list[float]]] = {m: {c: [] for c in concurrencies}
                                                  for m in modes}
    try:
        for r in range(repeats):
            for mode in modes:
                got = await measure(mode, model, cluster, pool, concurrencies)
                print(f"round {r + 1} {mode}: " + ", ".join(
                    f"c={c} {v:.0f} tok/s" for c, v in got.items()), flush=True)
                for c, v in got.items():
                    results[mode][c].append(v)
    finally:
        pool.shutdown()
        if cluster is not None:
            cluster.stop()

    def med(xs):
        return sorted(xs)[len(xs) // 2]

    base = modes[0]
    print(f"\nmodel {model}, 64 requests x 32 tokens, median of {repeats}")
    print("| mode | " + " | ".join(f"c={c} tok/s | vs {base}" for c in concurrencies) + " |")
    print("|---|" + "---|---|" * len(concurrencies))
    for mode in modes:
        cells = []
        for c in concurrencies:
            v = med(results[mode][c])
            cells += [f"{v:.0f}", f"{v / med(results[base][c]):.2f}"]
        print(f"| {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--concurrency", default="8,64")
    a = ap.parse_args()
    asyncio.run(main(a.model, a.repeats, a.modes.split(","),
                     [int(c) for c in a.concurrency.split(",")]))
