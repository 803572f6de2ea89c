"""Throughput of the function pool: a trivial reward through N workers at C concurrent calls.

Usage:
    python benchmarks/pool_throughput.py [--workers 2] [--concurrency 64] [--calls 5000]
    python benchmarks/pool_throughput.py --client httpx   # same load, httpx straight to workers
    python benchmarks/pool_throughput.py --client lean    # same load, rltune's client, no pool
    python benchmarks/pool_throughput.py --backend ray    # workers as Ray actors on a local
                                                          # cluster it starts (or --ray-address)

It measures the runtime (HTTP, JSON, validation, dispatch), not user code: the processor returns
a constant. The client modes bypass the pool's dispatch to compare HTTP clients side by side.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from pathlib import Path

import orjson

from rltune.functions import FunctionComponentSpec, FunctionPool

WS = Path(__file__).resolve().parents[1] / "tests" / "functions" / "fixtures" / "ws"
INPUT = {"ground_truth": "5", "agent_output": {
    "messages": [{"role": "user", "content": "2+3?"}, {"role": "assistant", "content": "5"}]}}


async def drive(call, concurrency: int, n: int) -> tuple[float, list[float]]:
    """Run ``n`` calls with ``concurrency`` in flight; return (elapsed, latencies)."""
    left = n
    latencies: list[float] = []

    async def client() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            t = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return time.perf_counter() - t0, sorted(latencies)


async def run(workers: int, concurrency: int, calls: int, warmup: int, client: str,
              backend: str = "local", ray_address: str | None = None) -> dict:
    spec = FunctionComponentSpec(
        classpath="functions.trivial.Trivial", func_type="reward", workspace=WS,
        runtime={"capacity": workers, "min_capacity": workers, "max_capacity": workers,
                 "concurrency": concurrency},
    )
    if backend == "ray":
        from rltune.functions.backends.ray_backend import RayBackend

        chosen = RayBackend(ray_address)
    else:
        from rltune.functions.backends.local import LocalProcessBackend

        chosen = LocalProcessBackend()
    t_start = time.perf_counter()
    async with await FunctionPool.start(spec, chosen) as pool:
        start_s = time.perf_counter() - t_start
        if client == "pool":
            async def call() -> None:
                out = await pool.call(INPUT)
                assert out.status.value == "success", out.error
        else:
            body = orjson.dumps(INPUT)
            urls = itertools.cycle([w.handle.url for w in pool.workers])
            if client == "httpx":
                import httpx

                hx = httpx.AsyncClient(limits=httpx.Limits(max_connections=None))

                async def call() -> None:
                    r = await hx.post(next(urls), content=body)
                    assert r.status_code == 200
            else:

                lean = itertools.cycle([w.http for w in pool.workers])

                async def call() -> None:
                    status, _ = await next(lean).post("/api/v1", body)
                    assert status == 200
        await drive(call, concurrency, warmup)
        elapsed, lat = await drive(call, concurrency, calls)
        m = pool.metrics()
    return {
        "backend": backend, "pool_start_s": round(start_s, 2),
        "client": client, "workers": workers, "concurrent_calls": concurrency, "calls": calls,
        "calls_per_s": round(calls / elapsed, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 2),
        "p95_ms": round(lat[int(len(lat) * 0.95)] * 1000, 2),
        "failures": m.failures, "restarts": m.restarts,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--client", choices=["pool", "httpx", "lean"], default="pool")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--ray-address", default=None,
                   help="an existing cluster; unset with --backend ray: start a local one "
                        "(one CPU per worker, stopped at the end)")
    a = p.parse_args()
    cluster = None
    if a.backend == "ray" and not a.ray_address:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from ray_cluster import LocalRayCluster

        cluster = LocalRayCluster(head_cpus=a.workers).start()
        a.ray_address = cluster.address
    try:
        print(json.dumps(asyncio.run(run(a.workers, a.concurrency, a.calls, a.warmup, a.client,
                                         a.backend, a.ray_address))))
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
