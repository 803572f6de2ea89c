"""Synthetic calculator-agent transcripts for the warm start (and the tokenizer's corpus).

A tool transcript is: system, user question, assistant ``calculator`` call, tool result,
assistant ``### ANSWER: <n> ###``. A direct transcript answers at once, without the tool. The
direct answers carry the true value, but a tiny model cannot compute hard questions in its head,
so after the warm start "answer directly" is often wrong and "use the tool" is almost always
right: exactly the gap RL should close.

Example:
    >>> from rltune.models.tasks import CalcTask
    >>> msgs = tool_transcript(CalcTask(37, "*", 4))
    >>> [m["role"] for m in msgs], msgs[-1]["content"]
    (['system', 'user', 'assistant', 'tool', 'assistant'], '### ANSWER: 148 ###')
"""

from __future__ import annotations

import json
import random
from typing import Any

from rltune.models.tasks import (
    SYSTEM_PROMPT,
    CalcTask,
    TaskConfig,
    format_answer,
    sample_tasks,
)


def tool_call_message(expression: str, call_id: str = "call_0") -> dict[str, Any]:
    """An OpenAI-format assistant message that calls ``calculator(expression)``."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": "calculator",
                    "arguments": json.dumps({"expression": expression}),
                },
            }
        ],
    }


def _prompt(task: CalcTask) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.question},
    ]


def tool_transcript(task: CalcTask) -> list[dict[str, Any]]:
    """The conversation in which the assistant uses the calculator, then answers."""
    return [
        *_prompt(task),
        tool_call_message(task.expression),
        {"role": "tool", "tool_call_id": "call_0", "content": task.answer},
        {"role": "assistant", "content": format_answer(task.answer)},
    ]


def direct_transcript(task: CalcTask) -> list[dict[str, Any]]:
    """The conversation in which the assistant answers without the tool."""
    return [*_prompt(task), {"role": "assistant", "content": format_answer(task.answer)}]


def make_transcripts(
    n: int, seed: int = 0, *, tool_fraction: float = 0.5, config: TaskConfig | None = None
) -> list[list[dict[str, Any]]]:
    """``n`` training-split transcripts; a ``tool_fraction`` share of them use the tool."""
    rng = random.Random(f"transcripts:{seed}")
    tasks = sample_tasks(n, "train", seed, config)
    return [
        tool_transcript(t) if rng.random() < tool_fraction else direct_transcript(t) for t in tasks
    ]
