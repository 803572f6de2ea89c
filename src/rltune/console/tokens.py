"""Token strings for the console's token view: decode a stored trajectory's ids per token.

The gateway stores token ids (and the trainer their log-probs), never text per token; the
console needs one string per id to colour by log-prob. The job server calls
:func:`with_token_text` for ``GET /v1/jobs/{id}/trajectories/{step}/{rid}?tokens=decoded``.
Uses only ``tokenizers`` (no torch, no transformers), and caches one tokenizer per file.

Example:
    >>> rec = {"tokens": [{"input_ids": [5, 6], "loss_mask": [0, 1], "logprobs": [0, -0.1]}]}
    >>> with_token_text(rec, None)["tokens"][0]["text"] is None   # no tokenizer: ids only
    True
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional


def tokenizer_dir(model: Optional[str], home: Optional[str | Path] = None) -> Optional[Path]:
    """The folder holding ``tokenizer.json`` for a job's ``model.name`` (see
    ``rltune.paths.check_model``); None when there is none (never builds or downloads)."""
    if not model:
        return None
    from rltune.paths import check_model
    from rltune.sdk.errors import RltuneError

    try:
        path = check_model(str(model), home).path
    except RltuneError:
        return None
    return path if path is not None and (path / "tokenizer.json").is_file() else None


@lru_cache(maxsize=8)
def _tokenizer(path: str, mtime: float) -> Any:  # mtime: a rebuilt model invalidates the cache
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def token_texts(ids: list[int], folder: str | Path) -> list[str]:
    """One string per id (special tokens kept; a byte split inside a character shows as �)."""
    file = Path(folder) / "tokenizer.json"
    tok = _tokenizer(str(file), file.stat().st_mtime)
    return tok.decode_batch([[int(i)] for i in ids], skip_special_tokens=False)


def with_token_text(record: dict[str, Any], folder: Optional[str | Path]) -> dict[str, Any]:
    """A copy of a trajectory record whose ``tokens[i]`` rows have ``text`` (or None)."""
    out = copy.copy(record)
    rows = []
    for row in record.get("tokens") or []:
        ids = row.get("input_ids") or []
        text = token_texts(ids, folder) if folder else None
        rows.append({**row, "text": text})
    out["tokens"] = rows
    return out
