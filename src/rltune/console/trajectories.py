"""Trajectory records as the console lists them: the prompt of a record and a light summary.

The job server's list route uses these for ``q`` (prompt filter) and ``fields=summary``, so
a page of 50 rows of a big step does not carry every message and token id to the browser.

Example:
    >>> rec = {"rollout_id": "r1", "reward": 1.0, "tokens": [{"input_ids": [1]}],
    ...        "messages": [{"role": "system", "content": "Be brief."},
    ...                     {"role": "user", "content": "What is 2 + 3?"}]}
    >>> prompt_of(rec)
    'What is 2 + 3?'
    >>> sorted(summary(rec))
    ['prompt', 'reward', 'rollout_id']
"""

from __future__ import annotations

from typing import Any

PROMPT_CHARS = 200
HEAVY = ("messages", "tokens")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def prompt_of(record: dict[str, Any]) -> str:
    """The first user message of a trajectory ('' when it has none)."""
    for m in record.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            return _text(m.get("content"))
    return ""


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The record without messages and tokens, plus ``prompt`` cut to 200 characters."""
    out = {k: v for k, v in record.items() if k not in HEAVY}
    out["prompt"] = prompt_of(record)[:PROMPT_CHARS]
    return out
