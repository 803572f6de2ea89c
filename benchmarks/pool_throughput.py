"""Throughput of the function pool: a trivial reward through N workers at C concurrent calls.

Usage: python benchmarks/pool_throughput.py [--workers 2] [--concurrency 64] [--calls 5000]

It measures the runtime (HTTP, JSON, validation, dispatch), not user code: the processor returns
a constant. Prints calls/s and latency percentiles as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from rltune.functions import FunctionComponentSpec, FunctionPool

WS = Path(__file__).resolve().parents[1] / "tests" / "functions" / "fixtures" / "ws"
INPUT = {"ground_truth": "5", "agent_output": {
    "messages": [{"role": "user", "content": "2+3?"}, {"role": "assistant", "content": "5"}]}}


async def run(workers: int, concurrency: int, calls: int, warmup: int) -> dict:
    spec = FunctionComponentSpec(
        classpath="functions.trivial.Trivial", func_type="reward", workspace=WS,
        runtime={"capacity": workers, "min_capacity": workers, "max_capacity": workers,
                 "concurrency": concurrency},
    )
    async with await FunctionPool.start(spec) as pool:
        remaining = warmup + calls
        latencies: list[float] = []
        t0 = 0.0

        async def client() -> None:
            nonlocal remaining, t0
            while remaining > 0:
                remaining -= 1
                if remaining == calls - 1:
                    t0 = time.perf_counter()
                start = time.perf_counter()
                out = await pool.call(INPUT)
                assert out.status.value == "success", out.error
                if remaining < calls:
                    latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
        latencies.sort()
        m = pool.metrics()
    return {
        "workers": workers, "concurrent_calls": concurrency, "calls": len(latencies),
        "calls_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2),
        "p95_ms": round(latencies[int(len(latencies) * 0.95)] * 1000, 2),
        "failures": m.failures, "restarts": m.restarts,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=500)
    a = p.parse_args()
    print(json.dumps(asyncio.run(run(a.workers, a.concurrency, a.calls, a.warmup))))


if __name__ == "__main__":
    main()
