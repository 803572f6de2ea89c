"""Job-list filters on the job metadata (Ark's ``project`` and ``tags``) and the algorithm.

Example:
    >>> rec = {"project": "search", "tags": {"team": "a", "exp": "7"}, "algorithm": "grpo"}
    >>> matches(rec, project="search", tags=parse_tags(["team=a", "exp"]), algorithm="GRPO")
    True
    >>> matches(rec, project=None, tags=parse_tags(["team=b"]), algorithm=None)
    False
"""

from __future__ import annotations

from typing import Any, Optional

from rltune.sdk.errors import ValidationError


def parse_tags(values: list[str]) -> dict[str, Optional[str]]:
    """``KEY`` (the tag is set) or ``KEY=VALUE`` per item → {key: value or None}."""
    out: dict[str, Optional[str]] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not key.strip():
            raise ValidationError(f"tag filter {item!r} has no key", where="tag",
                                  hint="write tag=team=search or tag=team")
        out[key.strip()] = value if sep else None
    return out


def matches(rec: dict[str, Any], *, project: Optional[str],
            tags: dict[str, Optional[str]], algorithm: Optional[str]) -> bool:
    if project is not None and rec.get("project") != project:
        return False
    if algorithm is not None and str(rec.get("algorithm", "")).lower() != algorithm.lower():
        return False
    have = rec.get("tags") or {}
    return all(k in have and (v is None or have[k] == v) for k, v in tags.items())
