"""The engine's token counters as per-step metrics: what was submitted, what was computed.

``engine/prompt_tokens`` counts the tokens of every prompt the engine was given (each of a
request's ``n`` copies), ``engine/prefill_tokens`` those it actually ran through the model in
prefill; their gap is what deduplication, the shared prefix and the prefix KV cache saved
(:mod:`rltune.engine.prefill`). Each step's row holds the counts since the previous row.

Example:
    >>> meter = EngineTokenMeter(engine)                       # doctest: +SKIP
    >>> meter.metrics()     # after a step                     # doctest: +SKIP
    {'engine/prompt_tokens': 1520.0, 'engine/prefill_tokens': 310.0}
"""

from __future__ import annotations

from typing import Any

#: metrics.jsonl name of each counter of ``Engine.token_counters``.
METRIC_NAMES = {"prompt_tokens": "engine/prompt_tokens",
                "prefill_tokens": "engine/prefill_tokens"}


class EngineTokenMeter:
    """Differences of an engine's token counters between calls of :meth:`metrics`."""

    def __init__(self, engine: Any):
        self.engine = engine
        self._last = self._read()

    def _read(self) -> dict[str, int]:
        counters = getattr(self.engine, "token_counters", None)
        return dict(counters()) if callable(counters) else {}

    def metrics(self) -> dict[str, float]:
        """The counts since the last call (or since the meter was made); none if the engine
        does not count."""
        now = self._read()
        out = {METRIC_NAMES[k]: float(v - self._last.get(k, 0))
               for k, v in now.items() if k in METRIC_NAMES}
        self._last = now
        return out
