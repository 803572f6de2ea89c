"""Multi-step calculator tasks: 2-4 dependent ``calculator`` calls, each on the previous result.

A question reads ``Start with 17. Add 25, then multiply by 3, then subtract 9.``; the agent
calls ``calculator("17 + 25")``, reads ``42``, calls ``calculator("42 * 3")`` and so on, and
ends with ``### ANSWER: 117 ###``. The system prompt, the tool and the answer form are the
calculator task's (``rltune.models.tasks``). Like there, everything is deterministic from a
seed and the train / held-out split is a stable hash of the question.

Example:
    >>> t = MultiStepTask(17, (("+", 25), ("*", 3), ("-", 9)))
    >>> t.question
    'Start with 17. Add 25, then multiply by 3, then subtract 9.'
    >>> t.expressions, t.values, t.answer
    (('17 + 25', '42 * 3', '126 - 9'), ('42', '126', '117'), '117')
    >>> [m["role"] for m in multistep_transcript(t)][2:]
    ['assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool', 'assistant']
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from rltune.models.tasks import (
    CALCULATOR_TOOL,
    SYSTEM_PROMPT,
    Split,
    format_answer,
    split_of,
)
from rltune.models.transcripts import tool_call_message
from rltune.sdk.errors import ValidationError

#: The words of each operation in a question.
OP_WORDS = {"+": "add", "-": "subtract", "*": "multiply by"}


@dataclass(frozen=True)
class MultiStepConfig:
    """Chains of ``min_steps``..``max_steps`` operations on operands in ``[low, high]``.

    ``max_value`` bounds every intermediate result's magnitude (chains that exceed it are
    drawn again), so the numbers a small model copies stay at most that many digits long.
    """

    min_steps: int = 2
    max_steps: int = 4
    low: int = 2
    high: int = 99
    ops: tuple[str, ...] = ("+", "-", "*")
    max_value: int = 9999
    heldout_percent: int = 20

    def __post_init__(self) -> None:
        def bad(what: str, value: Any, hint: str) -> ValidationError:
            return ValidationError(f"{what}={value!r} is invalid", where=f"MultiStepConfig.{what}",
                                   hint=hint)

        if not 1 <= self.min_steps <= self.max_steps <= 8:
            raise bad("max_steps", (self.min_steps, self.max_steps),
                      "use 1 <= min_steps <= max_steps <= 8")
        if not 0 <= self.low <= self.high:
            raise bad("high", (self.low, self.high), "use 0 <= low <= high")
        if not self.ops or any(op not in OP_WORDS for op in self.ops):
            raise bad("ops", self.ops, "use a non-empty subset of ('+', '-', '*')")
        if self.max_value < self.high:
            raise bad("max_value", self.max_value, "use at least `high`")
        if not 1 <= self.heldout_percent <= 99:
            raise bad("heldout_percent", self.heldout_percent, "use 1..99")


@dataclass(frozen=True)
class MultiStepTask:
    """``start`` followed by ``steps`` (operator, operand), applied left to right."""

    start: int
    steps: tuple[tuple[str, int], ...]

    @property
    def question(self) -> str:
        parts = [f"{OP_WORDS[op]} {n}" for op, n in self.steps]
        parts[0] = parts[0][0].upper() + parts[0][1:]
        return f"Start with {self.start}. " + ", then ".join(parts) + "."

    @property
    def values(self) -> tuple[str, ...]:
        """The result of each call, in order (the last is the answer)."""
        out, value = [], self.start
        for op, n in self.steps:
            value = value + n if op == "+" else value - n if op == "-" else value * n
            out.append(str(value))
        return tuple(out)

    @property
    def expressions(self) -> tuple[str, ...]:
        """The expression of each call, each on the previous call's result."""
        inputs = (str(self.start), *self.values[:-1])
        return tuple(f"{a} {op} {n}" for a, (op, n) in zip(inputs, self.steps, strict=True))

    @property
    def answer(self) -> str:
        return self.values[-1]


def sample_multistep(n: int, split: Split, seed: int = 0,
                     config: MultiStepConfig | None = None) -> list[MultiStepTask]:
    """``n`` tasks of ``split``, deterministic from ``seed`` (held-out ones never repeat)."""
    if split not in ("train", "heldout"):
        raise ValidationError(f"unknown split {split!r}", where="split",
                              hint="use 'train' or 'heldout'")
    cfg = config or MultiStepConfig()
    rng = random.Random(f"multistep:{seed}:{split}:{cfg}")
    out: list[MultiStepTask] = []
    seen: set[str] = set()
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 1000 * n + 1000:
            raise ValidationError(f"only {len(out)} {split} chains fit {cfg}, asked for {n}",
                                  where="sample_multistep(n)", hint="ask for fewer")
        length = rng.randint(cfg.min_steps, cfg.max_steps)
        task = MultiStepTask(
            rng.randint(cfg.low, cfg.high),
            tuple((rng.choice(cfg.ops), rng.randint(cfg.low, cfg.high)) for _ in range(length)),
        )
        if any(abs(int(v)) > cfg.max_value for v in task.values):
            continue
        if split_of(task.question, cfg.heldout_percent) != split:
            continue
        if split == "heldout":
            if task.question in seen:
                continue
            seen.add(task.question)
        out.append(task)
    return out


def multistep_row(task: MultiStepTask) -> dict[str, Any]:
    """The dataset row of one task: ``rollout_extra`` has the answer and every call's result."""
    return {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.question},
        ],
        "tools": [CALCULATOR_TOOL],
        "rollout_extra": {"solution": task.answer, "steps": list(task.values)},
    }


def make_multistep_rows(n: int, split: Split = "train", seed: int = 0,
                        config: MultiStepConfig | None = None) -> list[dict[str, Any]]:
    """``n`` dataset rows of ``split``."""
    return [multistep_row(t) for t in sample_multistep(n, split, seed, config)]


def multistep_transcript(task: MultiStepTask) -> list[dict[str, Any]]:
    """The conversation that makes every call in turn, then answers."""
    messages: list[dict[str, Any]] = list(multistep_row(task)["messages"])
    for expression, value in zip(task.expressions, task.values, strict=True):
        messages.append(tool_call_message(expression))
        messages.append({"role": "tool", "tool_call_id": "call_0", "content": value})
    messages.append({"role": "assistant", "content": format_answer(task.answer)})
    return messages


def make_multistep_transcripts(n: int, seed: int = 0,
                               config: MultiStepConfig | None = None) -> list[list[dict[str, Any]]]:
    """``n`` training-split transcripts."""
    return [multistep_transcript(t) for t in sample_multistep(n, "train", seed, config)]


def steps_right(messages: list[dict[str, Any]], values: list[str]) -> int:
    """How many of the chain's results the tool returned in order, from the first on.

    Example:
        >>> msgs = multistep_transcript(MultiStepTask(5, (("+", 3), ("*", 2))))
        >>> steps_right(msgs, ["8", "16"]), steps_right(msgs, ["9", "16"])
        (2, 0)
    """
    results = [str(m.get("content", "")).strip() for m in messages if m.get("role") == "tool"]
    right = 0
    for got, want in zip(results, values, strict=False):
        if got != str(want):
            break
        right += 1
    return right
