"""What the gateway records for every call of every rollout, and where it keeps it.

A :class:`CapturedCall` holds the exact token ids the engine consumed and sampled: the trainer
builds training rows from these ids (see :mod:`rltune.gateway.rows`) and never re-tokenizes the
chat messages, which are stored only for display and for the template-rewrite detector.

Example:
    >>> store = CaptureStore()
    >>> store.add(CapturedCall(rollout_id="r1", call_index=store.next_index("r1"),
    ...     prompt_ids=[1, 2], completion_ids=[3], completion_logprobs=[-0.5],
    ...     finish_reason="stop"))
    >>> [c.completion_ids for c in store.calls("r1")], store.pop("r1")[0].prompt_ids
    ([[3]], [1, 2])
    >>> store.calls("r1")
    []
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Optional

from pydantic import BaseModel, Field


class CapturedCall(BaseModel):
    """One sampled completion of one ``/v1/chat/completions`` call of a rollout.

    A call with ``n > 1`` gives ``n`` records sharing ``call_index`` with different
    ``choice_index``. ``prompt_ids`` include any forced prefix (e.g. the ``<tool_call>`` opener of
    ``tool_choice="required"``): those tokens were not sampled, so they train with mask 0.
    ``completion_logprobs`` are the engine's model log-probs at the sampling temperature
    (unfiltered; ``engine.types.Completion``).
    """

    rollout_id: str
    call_index: int
    choice_index: int = 0
    prompt_ids: list[int]
    completion_ids: list[int]
    completion_logprobs: list[float]
    finish_reason: str
    latency_s: float = 0.0
    started_at: float = Field(default_factory=time.time)
    weight_version: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: Optional[list[dict[str, Any]]] = None
    response_message: dict[str, Any] = Field(default_factory=dict)
    sampling: dict[str, Any] = Field(default_factory=dict)
    tool_parse_error: Optional[str] = None


class CaptureStore:
    """Thread-safe per-rollout lists of captured calls, in call-arrival order.

    ``calls(rid)`` copies without clearing; ``pop(rid)`` returns and forgets them (the trainer
    pops once the rollout has finished). Calls of a rollout are ordered by ``call_index``, the
    order in which the gateway *received* them, then by ``choice_index``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, list[CapturedCall]] = {}
        self._counters: dict[str, itertools.count] = {}

    def next_index(self, rollout_id: str) -> int:
        with self._lock:
            return next(self._counters.setdefault(rollout_id, itertools.count()))

    def add(self, call: CapturedCall) -> None:
        with self._lock:
            self._calls.setdefault(call.rollout_id, []).append(call)

    def calls(self, rollout_id: str) -> list[CapturedCall]:
        with self._lock:
            return _ordered(self._calls.get(rollout_id, []))

    def pop(self, rollout_id: str) -> list[CapturedCall]:
        with self._lock:
            self._counters.pop(rollout_id, None)
            return _ordered(self._calls.pop(rollout_id, []))

    def rollout_ids(self) -> list[str]:
        with self._lock:
            return list(self._calls)


def _ordered(calls: list[CapturedCall]) -> list[CapturedCall]:
    return sorted(calls, key=lambda c: (c.call_index, c.choice_index))
