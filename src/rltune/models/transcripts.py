"""Synthetic calculator-agent transcripts for the warm start (and the tokenizer's corpus).

A tool transcript is: system, user question, assistant ``calculator`` call, tool result,
assistant ``### ANSWER: <n> ###``. ``preference_rows`` pairs the tool transcript's answer
(chosen) with a wrong one (rejected) for DPO jobs (``rltune data make-preferences``). A direct
transcript answers at once, without the tool. The direct answers carry the true value, but a
tiny model cannot compute hard questions in its head, so after the warm start "answer
directly" is often wrong and "use the tool" is almost always right: exactly the gap RL should
close.

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
    CALCULATOR_TOOL,
    SYSTEM_PROMPT,
    CalcTask,
    Split,
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


def direct_transcript(task: CalcTask, answer: str | None = None) -> list[dict[str, Any]]:
    """The conversation in which the assistant answers without the tool (``answer``: what it
    says, by default the true value)."""
    said = task.answer if answer is None else answer
    return [*_prompt(task), {"role": "assistant", "content": format_answer(said)}]


def guess_for(task: CalcTask, rng: random.Random) -> str:
    """A plausible wrong answer: the value of another question with the same operator."""
    while True:
        other = CalcTask(rng.randrange(10), task.op, rng.randrange(10))
        if other.answer != task.answer:
            return other.answer


def make_transcripts(
    n: int,
    seed: int = 0,
    *,
    tool_fraction: float = 0.5,
    config: TaskConfig | None = None,
    guess_direct: bool = False,
) -> list[list[dict[str, Any]]]:
    """``n`` training-split transcripts; a ``tool_fraction`` share of them use the tool.

    ``guess_direct``: direct answers are plausible guesses instead of the true value, so the
    only way to a right answer is the tool. A model that can memorise the small question set
    otherwise learns the answers of training questions "by heart" alongside the tool, and that
    shortcut then leaks into the answer it copies from the tool on unseen questions.
    """
    rng = random.Random(f"transcripts:{seed}")
    guesses = random.Random(f"guesses:{seed}")  # its own stream: the tool/direct draw is unchanged
    tasks = sample_tasks(n, "train", seed, config)
    out = []
    for t in tasks:
        if rng.random() < tool_fraction:
            out.append(tool_transcript(t))
        else:
            out.append(direct_transcript(t, guess_for(t, guesses) if guess_direct else None))
    return out


def wrong_tool_use(task: CalcTask, rng: random.Random) -> list[dict[str, Any]]:
    """A wrong answer to ``task``: a guess without the tool, or the calculator called on
    another expression (a changed operand) and its result copied."""
    if rng.random() < 0.5:
        for _ in range(20):  # 0 * 0 has no other expression of another value nearby
            d = rng.choice((-3, -2, -1, 1, 2, 3))
            other = (CalcTask(task.a, task.op, max(0, task.b + d)) if rng.random() < 0.5
                     else CalcTask(max(0, task.a + d), task.op, task.b))
            if other.answer != task.answer:
                return [tool_call_message(other.expression),
                        {"role": "tool", "tool_call_id": "call_0", "content": other.answer},
                        {"role": "assistant", "content": format_answer(other.answer)}]
    return [{"role": "assistant", "content": format_answer(guess_for(task, rng))}]


def preference_rows(n: int, split: Split = "train", seed: int = 0,
                    config: TaskConfig | None = None) -> list[dict[str, Any]]:
    """``n`` DPO rows of calculator questions: the prompt (system, question, the tool), the
    correct tool use as ``chosen`` and a wrong answer (``wrong_tool_use``) as ``rejected``.

    Example:
        >>> row = preference_rows(1, seed=0)[0]
        >>> sorted(row)
        ['chosen', 'messages', 'rejected', 'solution', 'tools']
        >>> [m["role"] for m in row["chosen"]]
        ['assistant', 'tool', 'assistant']
    """
    rng = random.Random(f"preferences:{seed}:{split}")
    tasks = sample_tasks(n, split, seed, config, unique=(split == "heldout"))
    return [{"messages": _prompt(t), "tools": [CALCULATOR_TOOL],
             "chosen": tool_transcript(t)[2:], "rejected": wrong_tool_use(t, rng),
             "solution": t.answer} for t in tasks]
