"""The calculator tool of the demo task, with no dependency beyond the standard library (the
plugins import only the cloud SDK's names, so this workspace uploads to Ark unchanged)."""

from __future__ import annotations

import ast
import operator
import re

CALCULATOR_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / and parentheses.",
        "parameters": {"type": "object", "required": ["expression"], "properties": {
            "expression": {"type": "string", "description": "for example 37 * 4"}}},
    },
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv}
_FINAL = re.compile(r"###\s*ANSWER:\s*(.+?)\s*###")


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        return -_value(node.operand) if isinstance(node.op, ast.USub) else _value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("only numbers, + - * / and parentheses")


def calculate(expression: str) -> str:
    """``expression`` evaluated without ``eval`` (integers print without a decimal point)."""
    if not expression.strip() or len(expression) > 200:
        raise ValueError("give a short arithmetic expression")
    result = _value(ast.parse(expression.strip(), mode="eval").body)
    if abs(result) > 1e15:
        raise ValueError("the result is too large")
    return str(int(result)) if float(result).is_integer() else f"{round(result, 6):g}"


def extract_answer(text: str | None) -> str | None:
    """The answer of the last ``### ANSWER: <answer> ###`` in ``text`` (a number for the
    calculator task, a word or phrase for rows of the ``general`` preset)."""
    found = _FINAL.findall(text or "")
    return found[-1] if found else None
