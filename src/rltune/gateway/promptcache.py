"""Rendered prompts and their token ids, cached by what produced them (exact, bounded).

GRPO sends every prompt ``n_rollouts`` times, all in the same few milliseconds, so the gateway
rendered the same chat template and tokenized the same text ``n`` times; on the trl_compare
rollout that was the largest cost left on the event loop (benchmarks/RESULTS.md, 2026-12-03).
Both steps are pure functions of their inputs (the tokenizer and its template are fixed for a
service), so the cache returns exactly what a fresh render / tokenization would:

* ``text``: the rendered template, keyed by the canonical JSON of (messages, tools, template
  arguments);
* ``ids``: the token ids of a rendered text, keyed by the text.

Each map keeps the ``max_entries`` most recently used entries; texts longer than
``max_chars`` are not cached (a long agent conversation is rarely sent twice).

Example:
    >>> c = PromptCache(max_entries=2)
    >>> k = c.key([{"role": "user", "content": "hi"}], None, {})
    >>> c.text(k) is None
    True
    >>> c.put_text(k, "<user>hi"); c.text(k)
    '<user>hi'
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Optional


class PromptCache:
    """Two small LRU maps: render key → text, text → token ids."""

    def __init__(self, max_entries: int = 256, max_chars: int = 65536):
        self.max_entries, self.max_chars = max_entries, max_chars
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._ids: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self.stats = {"render_hits": 0, "token_hits": 0}

    @staticmethod
    def key(messages: Any, tools: Any, kwargs: dict[str, Any]) -> Optional[str]:
        """The render key, or None when the inputs are not plain JSON (then nothing is cached)."""
        try:
            return json.dumps([messages, tools, kwargs], sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            return None

    def text(self, key: Optional[str]) -> Optional[str]:
        if key is None or key not in self._texts:
            return None
        self._texts.move_to_end(key)
        self.stats["render_hits"] += 1
        return self._texts[key]

    def put_text(self, key: Optional[str], text: str) -> None:
        if key is not None and len(key) <= 4 * self.max_chars and len(text) <= self.max_chars:
            _put(self._texts, key, text, self.max_entries)

    def ids(self, text: str) -> Optional[list[int]]:
        found = self._ids.get(text)
        if found is None:
            return None
        self._ids.move_to_end(text)
        self.stats["token_hits"] += 1
        return list(found)

    def put_ids(self, text: str, ids: list[int]) -> None:
        if len(text) <= self.max_chars:
            _put(self._ids, text, tuple(ids), self.max_entries)


def _put(store: OrderedDict, key: str, value: Any, limit: int) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > limit:
        store.popitem(last=False)
