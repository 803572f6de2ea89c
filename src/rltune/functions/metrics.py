"""Pool metrics: counters plus a window of recent latencies for percentiles."""

from __future__ import annotations

import math
from collections import deque
from typing import Optional

from pydantic import BaseModel


def percentile(sorted_values: list[float], q: float) -> Optional[float]:
    """Nearest-rank percentile of an already sorted list (None when empty).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([], 0.9)
    (2.0, None)
    """
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[rank]


class LatencyWindow:
    """The last ``size`` call latencies (seconds)."""

    def __init__(self, size: int = 10_000):
        self._values: deque[float] = deque(maxlen=size)

    def add(self, seconds: float) -> None:
        self._values.append(seconds)

    def percentiles(self) -> dict[str, Optional[float]]:
        values = sorted(self._values)
        return {"p50": percentile(values, 0.50), "p95": percentile(values, 0.95),
                "p99": percentile(values, 0.99)}


class WorkerMetrics(BaseModel):
    worker_id: str
    pid: Optional[int]
    url: str
    in_flight: int
    rss_mb: float


class PoolMetrics(BaseModel):
    """What ``FunctionPool.metrics()`` returns; names are stable for the trainer and console."""

    name: str
    workers: int
    starting: int
    in_flight: int
    queued: int
    calls: int
    succeeded: int
    failures: int
    retries: int
    restarts: int
    scale_outs: int
    scale_ins: int
    latency_p50_s: Optional[float]
    latency_p95_s: Optional[float]
    latency_p99_s: Optional[float]
    worker_details: list[WorkerMetrics]
