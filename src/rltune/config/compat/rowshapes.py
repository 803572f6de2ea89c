"""Rows in the shapes other tools write, mapped to rltune's ``{messages, rollout_extra, …}``.

Accepted shapes (one row is a dict; every column is kept):

* rltune's own: ``messages`` (+ ``rollout_extra``, ``tools``, ``ground_truth``, ``extra``,
  ``thinking``); any other top-level column joins ``rollout_extra``;
* TRL's *standard* prompt: ``{"prompt": "text", "solution": …, …}`` — the string becomes one
  user message;
* TRL's *conversational* prompt: ``{"prompt": [{"role": …, "content": …}, …], …}``;
* TRL's prompt-completion: as above plus ``completion`` (kept as a column: a reference);
* verl's: ``{"prompt": [...], "data_source", "ability", "reward_model": {"ground_truth"},
  "extra_info"}`` — ``reward_model.ground_truth`` becomes ``ground_truth``.

Every column other than the prompt lands in ``rollout_extra`` under its own name, so reward
functions receive it: a TRL function as the keyword of that name, a verl ``compute_score`` as
``data_source`` / ``extra_info``.

Example:
    >>> row, notes = to_rltune_row({"prompt": "1+1?", "solution": "2", "level": 1})
    >>> row["messages"], row["rollout_extra"]
    ([{'role': 'user', 'content': '1+1?'}], {'solution': '2', 'level': 1})
    >>> notes
    ['prompt (a string) → messages (one user message)', 'solution, level → rollout_extra']
"""

from __future__ import annotations

from typing import Any

from rltune.sdk.errors import RowShapeError

#: Top-level fields of an rltune row (``rltune.config.data.DataRow``).
ROW_FIELDS = ("messages", "rollout_extra", "tools", "ground_truth", "extra", "thinking")
#: Default dotted path of the reference answer in a verl row.
VERL_GROUND_TRUTH = "reward_model.ground_truth"


def dotted(row: dict[str, Any], path: str) -> Any:
    """``row["a"]["b"]`` for ``"a.b"``; None when a part is missing."""
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def to_rltune_row(row: dict[str, Any], prompt_key: str = "prompt",
                  ground_truth_key: str = VERL_GROUND_TRUTH) -> tuple[dict[str, Any], list[str]]:
    """(the row in rltune's shape, what was mapped). ``RowShapeError`` when there is no prompt.

    The messages themselves are validated later (``DataRow``)."""
    notes: list[str] = []
    if "messages" in row:
        out = {k: row[k] for k in ROW_FIELDS if k in row}
        rest = {k: v for k, v in row.items() if k not in ROW_FIELDS}
        if rest:
            out["rollout_extra"] = {**rest, **(row.get("rollout_extra") or {})}
            notes.append(f"{', '.join(rest)} → rollout_extra")
        return out, notes
    prompt = dotted(row, prompt_key)
    if prompt is None:
        columns = ", ".join(map(str, row)) or "none"
        raise RowShapeError(
            f"no 'messages' and no '{prompt_key}' column (columns: {columns})")
    if isinstance(prompt, str):
        messages: Any = [{"role": "user", "content": prompt}]
        notes.append(f"{prompt_key} (a string) → messages (one user message)")
    else:
        messages = prompt
        notes.append(f"{prompt_key} → messages")
    out = {"messages": messages}
    top = prompt_key.split(".", 1)[0]
    for key in ROW_FIELDS[2:]:  # tools, ground_truth, extra, thinking keep their meaning
        if key in row:
            out[key] = row[key]
    truth = dotted(row, ground_truth_key) if "ground_truth" not in row else None
    if truth is not None:
        out["ground_truth"] = truth
        notes.append(f"{ground_truth_key} → ground_truth")
    rest = {k: v for k, v in row.items()
            if k not in ROW_FIELDS[1:] and k != top}
    extra = {**rest, **(row.get("rollout_extra") or {})}
    if extra:
        out["rollout_extra"] = extra
        if rest:
            notes.append(f"{', '.join(rest)} → rollout_extra")
    return out, notes
