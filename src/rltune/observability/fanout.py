"""``TrackedSink``: the job's sink plus its experiment trackers and stored spans.

Everything goes to the inner sink (``FileSink``: metrics.jsonl, trajectories, logs) as before;
metrics also go to every tracker under the same names (and under TRL's or verl's when
``observability.metric_names`` lists them, ``vocab.py``), the first ``samples`` trajectories of a
step go to each tracker's table, the training doctor's alerts to each tracker's alerts or
text, and, when spans are stored locally, each trajectory record gets its rollout's spans
(``record["spans"]``) before it is written.

A tracker that fails while the job runs is reported once in the log and left out from then
on; the job goes on (a tracker that cannot start stops the job before step 1, see session.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from rltune.observability.spanstore import SpanStore
from rltune.observability.trackers.base import Tracker, finite
from rltune.observability.vocab import aliases


def _text(message: Any) -> str:
    if message is None:
        return ""
    content = message.get("content") if isinstance(message, dict) else message
    return content if isinstance(content, str) else json.dumps(content, default=str)


def table_row(step: int, record: dict[str, Any]) -> list[Any]:
    """One row of the sample table (columns ``trackers.base.TABLE_COLUMNS``)."""
    messages = record.get("messages") or []
    prompt = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    answer = next((m for m in reversed(messages)
                   if isinstance(m, dict) and m.get("role") == "assistant"), None)
    return [step, record.get("rollout_id"), record.get("reward"), record.get("advantage"),
            record.get("status"), record.get("num_llm_calls"), record.get("response_tokens"),
            _text(prompt)[:2000], _text(answer)[:2000]]


class TrackedSink:
    def __init__(self, inner: Any, trackers: list[Tracker], *, samples: int = 4,
                 spans: Optional[SpanStore] = None, metric_names: Sequence[str] = ("rltune",)):
        self.inner = inner
        self.metric_names = tuple(metric_names)
        self.trackers = list(trackers)
        self.samples = samples
        self.spans = spans

    def _each(self, what: str, call: Any) -> None:
        for tracker in list(self.trackers):
            try:
                call(tracker)
            except Exception as exc:
                self.trackers.remove(tracker)
                self.inner.log(f"tracker {tracker.name} failed ({what}): "
                               f"{type(exc).__name__}: {exc}; it gets nothing more from this job",
                               level="WARNING")

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.inner.metrics(step, values)
        clean = finite(values)
        clean.update(aliases(clean, self.metric_names))  # TRL's / verl's names, when chosen
        self._each("metrics", lambda t: t.metrics(step, clean))

    def trajectories(self, step: int, records: Iterable[dict[str, Any]]) -> None:
        records = list(records)
        if self.spans is not None:
            for record in records:
                spans = self.spans.take(str(record.get("rollout_id")))
                if spans:
                    record["spans"] = spans
        self.inner.trajectories(step, records)
        if self.samples and records:
            rows = [table_row(step, r) for r in records[: self.samples]]
            self._each("table", lambda t: t.table(step, rows))

    def log(self, message: str, level: str = "INFO") -> None:
        self.inner.log(message, level)

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        """A training-doctor alert (already in ``alerts.jsonl`` and the log) for the inner
        sink, then each tracker: the tracker's own alerts where it has them (W&B), else text
        at the step."""
        self.inner.alert(step, code, title, text)
        self._each("alert", lambda t: t.alert(step, code, title, text))

    def progress(self, state: dict[str, Any]) -> None:
        self.inner.progress(state)

    def close(self) -> None:
        """Close the trackers (the inner sink belongs to whoever made it)."""
        self._each("close", lambda t: t.close())
        self.trackers.clear()
