"""The engine's token counters as per-step metrics (``engine/meter.py``)."""

from __future__ import annotations

from rltune.engine.meter import EngineTokenMeter


class Counting:
    def __init__(self):
        self.counts = {"prompt_tokens": 0, "prefill_tokens": 0}

    def token_counters(self):
        return dict(self.counts)


def test_each_call_reports_the_counts_since_the_last():
    engine = Counting()
    engine.counts.update(prompt_tokens=50, prefill_tokens=50)  # before the meter: not counted
    meter = EngineTokenMeter(engine)
    engine.counts.update(prompt_tokens=250, prefill_tokens=90)
    assert meter.metrics() == {"engine/prompt_tokens": 200.0, "engine/prefill_tokens": 40.0}
    assert meter.metrics() == {"engine/prompt_tokens": 0.0, "engine/prefill_tokens": 0.0}


def test_an_engine_without_counters_reports_nothing():
    assert EngineTokenMeter(object()).metrics() == {}
