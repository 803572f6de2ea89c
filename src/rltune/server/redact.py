"""Secrets never leave the server in an answer: ``env`` values and key-like fields are masked.

Example:
    >>> masked({"functions": [{"runtime": {"env": {"TOKEN": "abc"}}}], "api_key": "rlt-1"})
    {'functions': [{'runtime': {'env': {'TOKEN': '***'}}}], 'api_key': '***'}
"""

from __future__ import annotations

from typing import Any

MASK = "***"
#: Fields whose value is a secret wherever they appear.
SECRET_FIELDS = frozenset({"api_key", "instance_token", "token", "password", "secret"})


def masked(value: Any) -> Any:
    """A copy of ``value`` with every ``env`` mapping's values and secret fields masked."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "env" and isinstance(v, dict):
                out[k] = dict.fromkeys(v, MASK)
            elif k in SECRET_FIELDS and v is not None:
                out[k] = MASK
            else:
                out[k] = masked(v)
        return out
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value
