"""Calculator tasks: questions, ground truth, the ``calculator`` tool and dataset rows.

Everything here is pure Python (no torch) and deterministic from a seed, so datasets, the
warm start and the trainer's rewards all agree on the same questions and answers.

The train / held-out split is decided by a hash of the expression, not by the seed: a question
is in the same split for every seed and every size, so held-out questions never leak into
training data built with another seed.

Example:
    >>> from rltune.models.tasks import TaskConfig, sample_tasks, calculate, extract_answer
    >>> t = sample_tasks(1, "train", seed=0)[0]
    >>> calculate(t.expression) == t.answer
    True
    >>> extract_answer("So the result is ### ANSWER: 148 ###")
    '148'
    >>> calculate("37 * 4")
    '148'
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rltune.sdk.errors import ValidationError

Split = Literal["train", "heldout"]

#: System prompt of every calculator row (and of the warm-start transcripts).
SYSTEM_PROMPT = (
    "You are a careful assistant. Use the calculator tool for arithmetic. "
    "End with ### ANSWER: <number> ###"
)

#: OpenAI function-tool schema of the calculator.
CALCULATOR_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "for example 37 * 4"},
            },
            "required": ["expression"],
        },
    },
}

# Phrasings of a question. Few on purpose: tiny models must learn them in seconds.
QUESTION_TEMPLATES = ("What is {e}?", "Calculate {e}.", "Compute {e}.")

_ANSWER_RE = re.compile(r"###\s*ANSWER:\s*(-?\d+(?:\.\d+)?)\s*###")


@dataclass(frozen=True)
class TaskConfig:
    """Difficulty of generated questions: operands in ``[0, 10**digits - 1]`` with ``ops``.

    ``mul_digits`` bounds the operands of ``*`` separately (defaults to ``digits``). With
    ``mixed_lengths`` each operand first draws its length uniformly from 1..digits, so short
    operands are as common as long ones (an easy share that small models learn from first).
    """

    digits: int = 2
    ops: tuple[str, ...] = ("+", "-", "*")
    mul_digits: int | None = None
    mixed_lengths: bool = False
    heldout_percent: int = 20

    def __post_init__(self) -> None:
        if not 1 <= self.digits <= 6:
            raise ValidationError(
                f"digits={self.digits} is out of range",
                where="TaskConfig.digits",
                hint="use 1..6",
            )
        bad = [op for op in self.ops if op not in _BIN_OPS or op == "/"]
        if bad or not self.ops:
            raise ValidationError(
                f"unsupported ops {bad or self.ops!r}",
                where="TaskConfig.ops",
                hint="use a non-empty subset of ('+', '-', '*')",
            )
        if not 1 <= self.heldout_percent <= 99:
            raise ValidationError(
                f"heldout_percent={self.heldout_percent} is out of range",
                where="TaskConfig.heldout_percent",
                hint="use 1..99",
            )


@dataclass(frozen=True)
class CalcTask:
    """One question ``a op b`` with its ground truth."""

    a: int
    op: str
    b: int
    template: int = 0

    @property
    def expression(self) -> str:
        return f"{self.a} {self.op} {self.b}"

    @property
    def question(self) -> str:
        return QUESTION_TEMPLATES[self.template % len(QUESTION_TEMPLATES)].format(e=self.expression)

    @property
    def answer(self) -> str:
        return str(_BIN_OPS[self.op](self.a, self.b))


def split_of(expression: str, heldout_percent: int = 20) -> Split:
    """The split a question belongs to, from a stable hash of its expression."""
    digest = hashlib.sha256(expression.replace(" ", "").encode()).digest()
    return "heldout" if int.from_bytes(digest[:4], "big") % 100 < heldout_percent else "train"


def sample_tasks(
    n: int,
    split: Split,
    seed: int = 0,
    config: TaskConfig | None = None,
    *,
    unique: bool = False,
) -> list[CalcTask]:
    """Draw ``n`` tasks of ``split`` deterministically from ``seed``.

    With ``unique=True`` no expression repeats (useful for evaluation sets); if the split has
    fewer than ``n`` distinct questions a ``ValidationError`` says so.
    """
    if split not in ("train", "heldout"):
        raise ValidationError(
            f"unknown split {split!r}", where="split", hint="use 'train' or 'heldout'"
        )
    cfg = config or TaskConfig()
    rng = random.Random(f"{seed}:{split}:{cfg}")

    def operand(digits: int) -> int:
        if cfg.mixed_lengths:
            digits = rng.randint(1, digits)
        return rng.randint(0, 10**digits - 1)

    space = len(cfg.ops) * 100 ** max(cfg.digits, cfg.mul_digits or 0)
    seen: set[str] = set()
    out: list[CalcTask] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 10 * space:
            raise ValidationError(
                f"only {len(out)} distinct {split} questions exist for {cfg}, asked for {n}",
                where="sample_tasks(n)",
                hint="ask for fewer, or raise TaskConfig.digits",
            )
        op = rng.choice(cfg.ops)
        top = (cfg.mul_digits or cfg.digits) if op == "*" else cfg.digits
        task = CalcTask(operand(top), op, operand(top), rng.randrange(len(QUESTION_TEMPLATES)))
        if split_of(task.expression, cfg.heldout_percent) != split:
            continue
        if unique:
            if task.expression in seen:
                continue
            seen.add(task.expression)
        out.append(task)
    return out


# --- the calculator tool -------------------------------------------------------------------

_BIN_OPS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_MAX_EXPRESSION_CHARS = 200
_MAX_MAGNITUDE = 10**15


def calculate(expression: str) -> str:
    """Evaluate ``expression`` safely: numbers, ``+ - * /``, unary minus and parentheses only.

    Nothing is ever passed to ``eval``: the expression is parsed with ``ast`` and only the
    node types above are walked. Integer results print without a decimal point; other results
    are rounded to 6 decimals.

    Raises:
        ValidationError: the expression is empty, too long, uses anything else (names, calls,
            ``**``, attributes ...), divides by zero or overflows.

    Example:
        >>> calculate("(2 + 3) * -4"), calculate("7 / 2")
        ('-20', '3.5')
    """
    where = f"calculator(expression={expression!r})"
    if not isinstance(expression, str) or not expression.strip():
        raise ValidationError("expression is empty", where=where, hint='pass e.g. "37 * 4"')
    if len(expression) > _MAX_EXPRESSION_CHARS:
        raise ValidationError(
            f"expression is longer than {_MAX_EXPRESSION_CHARS} characters",
            where=where,
            hint="shorten it",
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValidationError(
            f"not an arithmetic expression ({exc.msg})",
            where=where,
            hint="use numbers, + - * / and parentheses",
        ) from None
    value = _eval_node(tree.body, where)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, int) else f"{round(value, 6):g}"


def _eval_node(node: ast.AST, where: str) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _eval_node(node.operand, where)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
        left, right = _eval_node(node.left, where), _eval_node(node.right, where)
        symbol = _AST_OPS[type(node.op)]
        if symbol == "/" and right == 0:
            raise ValidationError("division by zero", where=where, hint="change the divisor")
        result = _BIN_OPS[symbol](left, right)
        if abs(result) > _MAX_MAGNITUDE:
            raise ValidationError(
                "result is too large", where=where, hint=f"keep results under {_MAX_MAGNITUDE}"
            )
        return result
    raise ValidationError(
        f"{type(node).__name__} is not allowed",
        where=where,
        hint="use only numbers, + - * / and parentheses",
    )


def run_calculator_tool(arguments: str | dict[str, Any]) -> str:
    """Run one ``calculator`` tool call as an agent would: never raises, errors become text.

    ``arguments`` is the OpenAI ``function.arguments`` value (a JSON string) or its dict.

    Example:
        >>> run_calculator_tool('{"expression": "37 * 4"}')
        '148'
        >>> run_calculator_tool('{"expr": "1"}')[:6]
        'Error:'
    """
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        if not isinstance(args, dict) or not isinstance(args.get("expression"), str):
            return 'Error: arguments must be {"expression": "<arithmetic>"}'
        return calculate(args["expression"])
    except json.JSONDecodeError as exc:
        return f"Error: arguments are not JSON ({exc.msg})"
    except ValidationError as exc:
        return f"Error: {exc.message}"


# --- answers and rewards ---------------------------------------------------------------------


def extract_answer(text: str | None) -> str | None:
    """The number in the last ``### ANSWER: <n> ###`` of ``text``, or None."""
    if not text:
        return None
    found = _ANSWER_RE.findall(text)
    return found[-1] if found else None


#: ``### ANSWER: <n> ###`` ending a text (trailing whitespace allowed).
_ANSWER_AT_END_RE = re.compile(_ANSWER_RE.pattern + r"\s*$")


def answer_at_end(text: str | None) -> str | None:
    """The number of the ``### ANSWER: <n> ###`` that ends ``text``, or None: what the system
    prompt asks for ("End with ..."). A reward that takes the answer anywhere pays for text
    after it, and sampling hot drifts into ever longer tails (RESULTS.md, `make demo-agent`).

    Example:
        >>> answer_at_end("### ANSWER: 117 ###"), answer_at_end("### ANSWER: 117 ### ###")
        ('117', None)
    """
    if not text:
        return None
    found = _ANSWER_AT_END_RE.search(text)
    return found.group(1) if found else None


def is_correct(text: str | None, solution: str | int | float) -> bool:
    """Whether the last ``### ANSWER: <n> ###`` of ``text`` is right (numeric comparison;
    text after it is allowed, unlike the multistep template's reward)."""
    got = extract_answer(text)
    if got is None:
        return False
    try:
        return abs(float(got) - float(solution)) < 1e-6
    except ValueError:
        return False


def format_answer(value: str | int) -> str:
    return f"### ANSWER: {value} ###"


# --- dataset rows ----------------------------------------------------------------------------


def task_to_row(task: CalcTask) -> dict[str, Any]:
    """The dataset row of one task (the shape ``RolloutInput`` takes)."""
    return {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.question},
        ],
        "tools": [CALCULATOR_TOOL],
        "rollout_extra": {"solution": task.answer},
    }


def make_dataset_rows(
    n: int, split: Split = "train", seed: int = 0, config: TaskConfig | None = None
) -> list[dict[str, Any]]:
    """``n`` dataset rows of ``split``; held-out rows are distinct questions.

    Example:
        >>> row = make_dataset_rows(1, "heldout", seed=3)[0]
        >>> sorted(row), row["tools"][0]["function"]["name"]
        (['messages', 'rollout_extra', 'tools'], 'calculator')
    """
    tasks = sample_tasks(n, split, seed, config, unique=(split == "heldout"))
    return [task_to_row(t) for t in tasks]


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write rows as JSON Lines (UTF-8, one object per line) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
