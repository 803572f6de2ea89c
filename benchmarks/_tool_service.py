"""The agentic benchmark's tool: a real local HTTP service with latency and failures.

``POST /calculator {"expression": "..."}`` answers ``{"result": "..."}`` after a lognormal
delay (median ``--median`` s, log-sd ``--sigma``; the defaults 0.3 s and 0.82 put the 99th
percentile near 2 s) and fails with 503 at rate ``--fail`` (default 1 %). ``GET /stats`` counts
calls, failures and the delays served. Started and stopped by ``agentic_compare.py``:

    python benchmarks/_tool_service.py --port-file /tmp/port [--median 0.3 --fail 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
from pathlib import Path


def lognormal_delay(rng: random.Random, median: float, sigma: float) -> float:
    """One delay: ``median · exp(sigma · z)``, z standard normal (p99: ``median · e^{2.33σ}``).

    >>> round(0.3 * math.exp(2.326 * 0.82), 2)
    2.02
    """
    return median * math.exp(sigma * rng.gauss(0.0, 1.0))


class Latency:
    """A service's simulated wait and failures, and the counts it reports at ``/stats``."""

    def __init__(self, median: float, sigma: float, fail: float, seed: int):
        self.median, self.sigma, self.fail = median, sigma, fail
        self.rng = random.Random(seed)
        self.stats = {"calls": 0, "failures": 0, "delay_s": 0.0, "in_flight": 0,
                      "peak_in_flight": 0}

    async def wait(self) -> bool:
        """Wait one call's lognormal delay; True when this call is to fail."""
        stats = self.stats
        stats["calls"] += 1
        stats["in_flight"] += 1
        stats["peak_in_flight"] = max(stats["peak_in_flight"], stats["in_flight"])
        delay = lognormal_delay(self.rng, self.median, self.sigma)
        failed = self.rng.random() < self.fail
        try:
            await asyncio.sleep(delay)
        finally:
            stats["in_flight"] -= 1
        stats["delay_s"] += delay
        if failed:
            stats["failures"] += 1
        return failed


def add_latency_args(ap: argparse.ArgumentParser) -> None:
    """A tool service's latency and failure options (``Latency``'s arguments)."""
    ap.add_argument("--median", type=float, default=0.3)
    ap.add_argument("--sigma", type=float, default=0.82)
    ap.add_argument("--fail", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)


def build_app(median: float, sigma: float, fail: float, seed: int):
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from rltune.models.tasks import calculate

    app = FastAPI()
    latency = Latency(median, sigma, fail, seed)
    stats = latency.stats

    @app.post("/calculator")
    async def calculator(body: dict):
        if await latency.wait():
            return JSONResponse({"error": "tool service unavailable"}, status_code=503)
        try:
            return {"result": calculate(str(body.get("expression", "")))}
        except Exception as exc:  # a bad expression is an answer the model can read
            return {"result": f"error: {exc}"}

    @app.get("/stats")
    async def get_stats():
        return stats

    return app


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port-file", type=Path, required=True)
    add_latency_args(ap)
    args = ap.parse_args()
    config = uvicorn.Config(build_app(args.median, args.sigma, args.fail, args.seed),
                            host="127.0.0.1", port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        args.port_file.write_text(str(port))
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
