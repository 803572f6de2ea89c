"""Training data: rows ``{messages, rollout_extra, tools?}`` (or TRL's / verl's ``{prompt, …}``,
from JSONL, JSON, parquet or a saved ``datasets`` folder) validated row by row, and a
seeded per-epoch sampler whose state can be saved and restored (exact resume).

A bad file raises one ``DatasetError`` listing every bad line (line number and field); nothing
is half-loaded.

Example:
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.jsonl"
    >>> _ = p.write_text('{"messages": [{"role": "user", "content": "1+1?"}],'
    ...                  ' "rollout_extra": {"solution": "2"}}\\n')
    >>> rows = load_dataset(p)
    >>> rows[0].ground_truth, rows[0].line
    ('2', 1)
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rltune.config.compat.rowshapes import RowShapeError, to_rltune_row
from rltune.config.errors import format_path
from rltune.config.yaml_io import MAX_DEPTH, nesting_depth
from rltune.sdk.errors import DatasetError

#: Keys of ``rollout_extra`` that hold the reference answer, in priority order.
GROUND_TRUTH_KEYS = ("solution", "ground_truth", "answer")
#: Row fields passed to the rollout input as they are (Volcano Ark's sample fields).
FORWARDED_KEYS = ("extra", "thinking")
_MAX_LISTED_ERRORS = 20


class Message(BaseModel):
    """One chat message of a prompt (OpenAI format; extra keys such as ``name`` kept)."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: Union[str, list[Any], None] = None

    @model_validator(mode="after")
    def _has_content(self) -> Message:
        has_calls = bool((self.model_extra or {}).get("tool_calls"))
        if self.content is None and not has_calls:
            raise ValueError(f"a '{self.role}' message needs 'content'")
        return self


class Tool(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["function"] = "function"
    function: dict[str, Any]

    @model_validator(mode="after")
    def _named(self) -> Tool:
        if not isinstance(self.function.get("name"), str) or not self.function["name"]:
            raise ValueError("tool 'function' needs a non-empty 'name'")
        return self


class DataRow(BaseModel):
    """One prompt. ``ground_truth`` is filled from ``rollout_extra`` when the row lacks it."""

    model_config = ConfigDict(extra="allow")

    messages: list[Message] = Field(min_length=1)
    rollout_extra: Optional[dict[str, Any]] = None
    tools: Optional[list[Tool]] = None
    ground_truth: Any = None
    #: Volcano Ark's sample fields, handed to the rollout as they are (``RolloutInput.extra``
    #: / ``.thinking``): free-form data for graders, and the thinking switch for the model.
    extra: Optional[dict[str, Any]] = None
    thinking: Optional[dict[str, Any]] = None
    #: 1-based line in the source file (0 when built in code).
    line: int = Field(0, exclude=True)

    def message_dicts(self) -> list[dict[str, Any]]:
        """The messages as plain dicts (what ``RolloutInput.messages`` takes)."""
        return [m.model_dump(exclude_none=True) for m in self.messages]

    def tool_dicts(self) -> list[dict[str, Any]] | None:
        return [t.model_dump() for t in self.tools] if self.tools else None

    def forwarded_fields(self) -> dict[str, Any]:
        """Row fields a rollout input carries besides messages, tools and rollout_extra."""
        return {k: v for k in FORWARDED_KEYS if (v := getattr(self, k)) is not None}


def fill_ground_truth(row: DataRow) -> DataRow:
    """Set ``row.ground_truth`` if unset from ``rollout_extra`` (solution, ground_truth,
    answer), else from Ark's ``extra`` (same keys)."""
    for source in (row.rollout_extra, row.extra):
        if row.ground_truth is not None:
            break
        for key in GROUND_TRUTH_KEYS if source else ():
            if source.get(key) is not None:
                row.ground_truth = source[key]
                break
    return row


#: Longest accepted JSONL line, characters.
MAX_ROW_CHARS = 2_000_000
_TOO_DEEP = object()


def _json_object(text: str) -> tuple[Any, str | None]:
    """The JSON object on one line, or what is wrong with the line."""
    if len(text) > MAX_ROW_CHARS:
        return None, f"the line is {len(text)} characters; the limit is {MAX_ROW_CHARS}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        obj = _TOO_DEEP
    if obj is _TOO_DEEP or nesting_depth(obj) > MAX_DEPTH:
        return None, f"the row is nested more than {MAX_DEPTH} levels deep"
    if not isinstance(obj, dict):
        return None, f"a row must be a JSON object, got {type(obj).__name__}"
    return obj, None


#: One row as read from a file: (its line or row number, the object, or why it is not one).
RawRow = tuple[int, Any, "str | None"]


def parse_rows(lines: list[str], *, source: str = "<data>") -> list[DataRow]:
    """Validate JSONL lines; raise one ``DatasetError`` naming every bad line and field."""
    return validate_rows(_line_objects(lines), source=source)


def validate_rows(objects: Iterable[RawRow], *, source: str = "<data>") -> list[DataRow]:
    """Rows from ``(number, object, problem)`` triples, each object in rltune's, TRL's or
    verl's shape (``rltune.config.compat.rowshapes``); one ``DatasetError`` names every bad row."""
    rows, errors = check_rows(objects, source=source)
    if errors:
        raise bad_rows_error(errors, source)
    if not rows:
        raise DatasetError(f"{source} has no rows", where=source,
                           hint="add one JSON object per line")
    return rows


def check_rows(objects: Iterable[RawRow], *,
               source: str = "<data>") -> tuple[list[DataRow], list[str]]:
    """(the valid rows, one ``file:line: reason`` per bad row field) of ``objects``."""
    rows: list[DataRow] = []
    errors: list[str] = []
    for number, obj, problem in objects:
        if problem:
            errors.append(f"{source}:{number}: {problem}")
            continue
        try:
            obj, _ = to_rltune_row(obj)
            row = DataRow.model_validate(obj)
        except RowShapeError as exc:
            errors.append(f"{source}:{number}: {exc}")
            continue
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                field = format_path(tuple(p for p in err["loc"] if not str(p).startswith(
                    ("function-", "union[", "str", "list["))))
                msg = str(err["msg"]).removeprefix("Value error, ")
                errors.append(f"{source}:{number}: field '{field}': {msg}")
            continue
        row.line = number
        rows.append(fill_ground_truth(row))
    return rows, errors


def bad_rows_error(errors: list[str], source: str, why: str = "") -> DatasetError:
    """One ``DatasetError`` listing the bad rows ``errors`` (``file:line: reason`` each)."""
    shown = errors[:_MAX_LISTED_ERRORS]
    more = len(errors) - len(shown)
    tail = f"\n  ... and {more} more" if more > 0 else ""
    return DatasetError(
        f"{len(errors)} bad row(s) in {source}{why}:\n  " + "\n  ".join(shown) + tail,
        where=shown[0].split(": ", 1)[0],
        hint='each row needs {"messages": [{"role": "user", "content": "..."}]} '
             '(rltune) or {"prompt": "..." or [messages]} (TRL, verl); other columns '
             "reach the rewards. For another prompt column: rltune data convert "
             "--prompt-key KEY",
    )


#: Dataset files read through ``rltune.config.compat.convert.read_source`` (not line-based JSONL).
TABLE_SUFFIXES = (".parquet", ".json")


def load_dataset(path: str | Path) -> list[DataRow]:
    """Load and validate a dataset: JSONL, a JSON list, a parquet file or a folder saved by
    ``datasets.Dataset.save_to_disk`` (rows in rltune's, TRL's or verl's shape)."""
    return validate_rows(read_objects(path), source=str(path))


def read_objects(path: str | Path) -> list[RawRow]:
    """Every row of a dataset file or folder as ``(number, object, problem)``, or a
    ``DatasetError`` when it cannot be read at all."""
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"dataset file not found: {p}", where=str(p),
                           hint="check file_name in the job's datasets")
    if p.is_dir() or p.suffix in TABLE_SUFFIXES:
        from rltune.config.compat.convert import read_source

        return [(n, *_table_row(obj))
                for n, obj in enumerate(read_source(p, split="train"), start=1)]
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"dataset is not UTF-8 text ({exc.reason} at byte {exc.start})",
                           where=str(p), hint="save the file as UTF-8 JSONL") from None
    return list(_line_objects(text.splitlines()))


def as_jsonl(path: str | Path) -> tuple[str, bytes]:
    """``(file name, JSONL bytes)`` of any dataset ``load_dataset`` reads, for the job server's
    file upload (which keeps JSONL): a JSONL file as it is, a parquet or JSON file or a saved
    ``datasets`` folder written out row by row, after the same row checks as a local run."""
    p = Path(path)
    if not (p.is_dir() or p.suffix in TABLE_SUFFIXES):
        return p.name, p.read_bytes()
    load_dataset(p)  # a bad row is refused here, naming it, as `rltune train` would
    lines = (json.dumps(obj, ensure_ascii=False, default=str) for _, obj, _ in read_objects(p))
    return f"{p.stem if p.is_file() else p.name}.jsonl", ("\n".join(lines) + "\n").encode()


def _line_objects(lines: list[str]) -> Iterable[RawRow]:
    return ((n, *_json_object(text)) for n, text in enumerate(lines, start=1)
            if text.strip())  # blank lines (e.g. a trailing newline) are not rows


def _table_row(obj: Any) -> tuple[Any, str | None]:
    if not isinstance(obj, dict):
        return None, f"a row must be an object, got {type(obj).__name__}"
    return obj, None


class EpochSampler:
    """Yields batches of row indices: each epoch a fresh permutation seeded by (seed, epoch).

    A final incomplete batch is dropped (every step has exactly ``batch_size`` prompts).
    ``sample_extra`` draws refill prompts (DAPO dynamic sampling) from a separate seeded stream
    so refills never disturb the epoch order. ``state_dict`` / ``load_state_dict`` make resume
    continue exactly.

    Example:
        >>> s = EpochSampler(n_rows=5, batch_size=2, seed=1)
        >>> a = s.next_batch(); state = s.state_dict(); b = s.next_batch()
        >>> s2 = EpochSampler(n_rows=5, batch_size=2, seed=1); s2.load_state_dict(state)
        >>> s2.next_batch() == b, s.steps_per_epoch
        (True, 2)
    """

    def __init__(self, n_rows: int, batch_size: int, seed: int = 0):
        if n_rows < batch_size:
            raise DatasetError(f"{n_rows} rows are fewer than batch_size {batch_size}",
                               hint=f"set batch_size to at most {n_rows} or add rows")
        self.n_rows, self.batch_size, self.seed = n_rows, batch_size, seed
        self.epoch = 0
        self.position = 0
        self._order = self._permutation(0)
        self._extra = random.Random(f"{seed}:extra")

    @property
    def steps_per_epoch(self) -> int:
        return self.n_rows // self.batch_size

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(self.n_rows))
        random.Random(f"{self.seed}:{epoch}").shuffle(order)
        return order

    def next_batch(self) -> list[int]:
        """The next ``batch_size`` indices, moving to a new epoch when this one is used up."""
        if self.position + self.batch_size > self.n_rows:
            self.epoch += 1
            self.position = 0
            self._order = self._permutation(self.epoch)
        batch = self._order[self.position : self.position + self.batch_size]
        self.position += self.batch_size
        return batch

    def sample_extra(self, k: int) -> list[int]:
        """``k`` extra indices (refill) from an independent seeded stream."""
        return [self._extra.randrange(self.n_rows) for _ in range(k)]

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self._extra.getstate()
        return {"n_rows": self.n_rows, "batch_size": self.batch_size, "seed": self.seed,
                "epoch": self.epoch, "position": self.position,
                "extra_rng": [version, list(internal), gauss]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("n_rows", "batch_size", "seed"):
            if state[key] != getattr(self, key):
                raise DatasetError(
                    f"checkpoint data order has {key}={state[key]} but the job has "
                    f"{getattr(self, key)}",
                    hint="resume with the same dataset and hyper-parameters as the checkpoint",
                )
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._permutation(self.epoch)
        version, internal, gauss = state["extra_rng"]
        self._extra.setstate((version, tuple(internal), gauss))
