"""Convert verl / Hugging Face style datasets to rltune's JSONL, row by row.

A verl row (``examples/data_preprocess`` in verl) looks like::

    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "..."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
     "extra_info": {"split": "train", "index": 0}}

and becomes ``{"messages": prompt, "ground_truth": "72", "rollout_extra": {"data_source",
"ability", "reward_model", "extra_info"}}`` — every column but the prompt is kept, under its own
name, for the rewards (a verl ``compute_score`` wrapped by ``rltune.sdk.plain.verl_reward`` reads
``data_source`` and ``extra_info``; a TRL function gets each column as a keyword). TRL rows
(``{"prompt": "…" or [messages], "solution": …}``) convert the same way
(``rltune.config.compat.rowshapes``). A string prompt becomes one user message. Sources:
``.parquet`` (needs ``pyarrow``: ``pip install 'rltune[data]'``), a ``datasets`` folder saved
with ``save_to_disk`` (needs ``datasets``), or ``.jsonl`` / ``.json`` in the same shape.

Example:
    >>> rows, errors = convert_rows([
    ...     {"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "toy",
    ...      "reward_model": {"ground_truth": "2"}},
    ...     {"prompt": [], "reward_model": {"ground_truth": "3"}}])
    >>> rows[0]["ground_truth"], rows[0]["rollout_extra"]["data_source"]
    ('2', 'toy')
    >>> errors
    ['row 2: prompt: is empty; give at least one message']
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Optional

import pydantic

from rltune.config.compat.rowshapes import VERL_GROUND_TRUTH, dotted, to_rltune_row
from rltune.sdk.errors import DatasetError, DependencyError


def convert_row(row: Any, prompt_key: str = "prompt",
                ground_truth_key: str = VERL_GROUND_TRUTH,
                notes: Optional[dict[str, int]] = None) -> dict[str, Any]:
    """One source row → one rltune row (every column kept); ``ValueError`` says what is
    wrong. ``notes`` counts what was mapped (``"prompt → messages"``: rows)."""
    from rltune.config.data import DataRow

    if isinstance(row, _BadLine):
        raise ValueError(str(row))
    if not isinstance(row, dict):
        raise ValueError(f"is a {type(row).__name__}, not an object")
    if "messages" not in row and dotted(row, prompt_key) is None:
        raise ValueError(f"{prompt_key}: missing; name the prompt column with --prompt-key")
    out, mapped = to_rltune_row(row, prompt_key, ground_truth_key)
    prompt = out["messages"]
    if not isinstance(prompt, list):
        raise ValueError(f"{prompt_key}: is a {type(prompt).__name__}; give a list of "
                         "{role, content} messages or a string")
    if not prompt:
        raise ValueError(f"{prompt_key}: is empty; give at least one message")
    try:
        DataRow.model_validate(out)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"{prompt_key if loc.startswith('messages') else loc}"
                         f"{loc[len('messages'):] if loc.startswith('messages') else ''}: "
                         f"{err['msg']}") from None
    if notes is not None:
        for note in mapped:
            notes[note] = notes.get(note, 0) + 1
    return out


def convert_rows(rows: Iterable[Any], notes: Optional[dict[str, int]] = None,
                 **keys: str) -> tuple[list[dict], list[str]]:
    """(converted rows, ``row N: …`` errors) — every row is tried."""
    out, errors = [], []
    for n, row in enumerate(rows, 1):
        try:
            out.append(convert_row(row, notes=notes, **keys))
        except ValueError as exc:
            errors.append(f"row {n}: {exc}")
    return out, errors


def read_source(path: str | Path, split: Optional[str] = None) -> Iterator[Any]:
    """Rows of a parquet file, a saved ``datasets`` folder or a JSON/JSONL file."""
    p = Path(path)
    if p.is_dir():
        try:
            import datasets
        except ImportError:
            raise DependencyError(f"{p} is a folder: reading a saved Hugging Face dataset needs "
                                  "the datasets package", where=str(p),
                                  hint="pip install datasets") from None
        ds = datasets.load_from_disk(str(p))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise DatasetError(f"{p} has splits {sorted(ds)}", where=str(p),
                                   hint="choose one with --split (rltune data convert); a "
                                   "job reads the 'train' split")
            ds = ds[split]
        yield from ds
    elif p.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DependencyError("reading parquet needs pyarrow", where=str(p),
                                  hint="pip install 'rltune[data]' (or pyarrow)") from None
        yield from pq.read_table(p).to_pylist()
    elif p.suffix in (".jsonl", ".json"):
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".json":
            data = json.loads(text)
            yield from (data if isinstance(data, list) else [data])
            return
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    yield _BadLine(f"not JSON ({exc.msg}) at line {n}")
    else:
        raise DatasetError(f"cannot read {p.name}", where=str(p),
                           hint="give a .parquet, .jsonl or .json file or a saved datasets folder")


class _BadLine(str):
    """A source line that is not JSON (reported as that row's error)."""
