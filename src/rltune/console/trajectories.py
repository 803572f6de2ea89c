"""Trajectory records as the console lists them: the prompt of a record and a light summary.

The job server's trajectory routes use these: ``q`` (prompt filter), ``fields=summary`` (a page
of 50 rows does not carry every message and token id to the browser) and :func:`step_index`
(pages of a 10,000-trajectory step read 50 lines, not the whole file).

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

import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

PROMPT_CHARS = 200
HEAVY = ("messages", "tokens", "spans")


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
    """The record without messages, tokens and spans, plus ``prompt`` cut to 200 characters."""
    out = {k: v for k, v in record.items() if k not in HEAVY}
    out["prompt"] = prompt_of(record)[:PROMPT_CHARS]
    return out


# ---------------------------------------------------------------------- step-file index
#
# A step of a big job holds 10,000+ trajectories (tens of MB of JSONL with token ids). Parsing
# the whole file on every page click costs ~1.5 s (benchmarks/RESULTS.md, "Console"), so the
# server keeps, per step file, the byte span and the filterable fields of each line, and reads
# only the lines a page shows. The index is rebuilt when the file's size or mtime changes.

_FILTER_KEYS = ("rollout_id", "reward", "status", "sample_index")


class StepIndex:
    """Byte spans and filter fields of each complete line of one ``step_NNNNNN.jsonl``.

    Example:
        >>> import json, tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "step_000001.jsonl"
        >>> rows = [{"rollout_id": f"r{i}", "reward": i / 4, "sample_index": i // 2,
        ...          "status": "success", "messages": [{"role": "user", "content": f"q{i // 2}"}]}
        ...         for i in range(4)]
        >>> _ = p.write_text("".join(json.dumps(r) + "\\n" for r in rows))
        >>> idx = step_index(p)
        >>> [r["rollout_id"] for r in idx.read(idx.select(min_reward=0.5))]
        ['r2', 'r3']
        >>> [r["rollout_id"] for r in idx.read(idx.select(q="Q0"))]
        ['r0', 'r1']
    """

    def __init__(self, path: Path):
        self.path = path
        st = path.stat()
        self.key = (st.st_size, st.st_mtime_ns)
        self.spans: list[tuple[int, int]] = []
        self.fields: list[dict[str, Any]] = []
        self.by_id: dict[str, int] = {}
        with path.open("rb") as fh:
            pos = 0
            for raw in fh:
                start, pos = pos, pos + len(raw)
                if not raw.endswith(b"\n"):
                    break  # a torn last line of a job that is writing
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                row = {k: rec.get(k) for k in _FILTER_KEYS}
                row["prompt"] = prompt_of(rec).lower()
                self.by_id.setdefault(str(row["rollout_id"]), len(self.spans))
                self.spans.append((start, pos - start))
                self.fields.append(row)

    def select(
        self,
        *,
        min_reward: Optional[float] = None,
        max_reward: Optional[float] = None,
        status: Optional[str] = None,
        sample_index: Optional[int] = None,
        rollout_id: Optional[str] = None,
        q: Optional[str] = None,
    ) -> list[int]:
        """Line numbers (0-based, file order) whose fields pass every given filter."""
        if rollout_id is not None:
            i = self.by_id.get(rollout_id)
            candidates: Any = [] if i is None else [i]
        else:
            candidates = range(len(self.fields))
        q = q.lower() if q else None
        out = []
        for i in candidates:
            f = self.fields[i]
            reward = f["reward"]
            if min_reward is not None and (reward is None or reward < min_reward):
                continue
            if max_reward is not None and (reward is None or reward > max_reward):
                continue
            if status is not None and f["status"] != status:
                continue
            if sample_index is not None and f["sample_index"] != sample_index:
                continue
            if q and q not in f["prompt"]:
                continue
            out.append(i)
        return out

    def read(self, lines: list[int]) -> list[dict[str, Any]]:
        """The full records of the given line numbers, read by seeking to each one."""
        out = []
        with self.path.open("rb") as fh:
            for i in lines:
                start, length = self.spans[i]
                fh.seek(start)
                out.append(json.loads(fh.read(length)))
        return out


_CACHE: OrderedDict[str, StepIndex] = OrderedDict()
_CACHE_SIZE = 8
_LOCK = threading.Lock()


def step_index(path: str | Path) -> StepIndex:
    """The (cached) index of a step file; rebuilt when the file changed since it was built."""
    path = Path(path)
    st = path.stat()
    name = str(path.resolve())
    with _LOCK:
        idx = _CACHE.get(name)
        if idx is not None and idx.key == (st.st_size, st.st_mtime_ns):
            _CACHE.move_to_end(name)
            return idx
    idx = StepIndex(path)  # outside the lock: building a big index takes a while
    with _LOCK:
        _CACHE[name] = idx
        _CACHE.move_to_end(name)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return idx
