"""Backpressure: at most ``limit`` chat calls in the engine at once; beyond it, 429.

A call over the limit is refused before it is read or numbered, so nothing of it is captured
and the rollout's retry is its first call again (nothing counted twice). The answer carries
``Retry-After`` (whole seconds, RFC 9110) and ``retry-after-ms`` (what the OpenAI clients read
first): the recent mean time of one call, so a client retries about when a slot frees up.

Example:
    >>> a = Admission(limit=1)
    >>> a.enter(), a.enter(), a.stats["rejected"]
    (True, False, 1)
    >>> a.leave(latency_s=0.4); a.retry_after_s()
    0.4
"""

from __future__ import annotations

import math
from typing import Optional

#: Bounds of the advised wait (seconds): never a busy loop, never a stall.
MIN_RETRY_S, MAX_RETRY_S = 0.05, 30.0


class Admission:
    """Counts the calls in flight; ``limit=None`` admits everything (the default)."""

    def __init__(self, limit: Optional[int] = None):
        if limit is not None and limit < 1:
            raise ValueError(f"max_concurrent_requests must be >= 1, got {limit}")
        self.limit = limit
        self.in_flight = 0
        self._mean_s: Optional[float] = None
        self.stats = {"admitted": 0, "rejected": 0, "peak_in_flight": 0}

    def enter(self) -> bool:
        """Take a slot (True) or refuse the call (False: answer 429)."""
        if self.limit is not None and self.in_flight >= self.limit:
            self.stats["rejected"] += 1
            return False
        self.in_flight += 1
        self.stats["admitted"] += 1
        self.stats["peak_in_flight"] = max(self.stats["peak_in_flight"], self.in_flight)
        return True

    def leave(self, latency_s: Optional[float] = None) -> None:
        """Free the slot; ``latency_s`` (the call's time) feeds the advised wait."""
        self.in_flight = max(0, self.in_flight - 1)
        if latency_s is not None and latency_s >= 0:
            m = self._mean_s
            self._mean_s = latency_s if m is None else 0.8 * m + 0.2 * latency_s

    def retry_after_s(self) -> float:
        """Seconds a refused client should wait: the recent mean call time, bounded."""
        guess = self._mean_s if self._mean_s is not None else 0.5
        return round(min(MAX_RETRY_S, max(MIN_RETRY_S, guess)), 3)

    def headers(self) -> dict[str, str]:
        wait = self.retry_after_s()
        return {"Retry-After": str(max(1, math.ceil(wait))),
                "retry-after-ms": str(int(wait * 1000))}
