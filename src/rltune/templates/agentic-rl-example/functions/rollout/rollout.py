"""The Bailian demo's rollout (``CalcXRolloutProcessor``): the model may call a calculator
tool, then answers ``### ANSWER: <n> ###``. Imports only the cloud SDK's names and openai."""

from __future__ import annotations

import ast
import json
import operator
import time

from dashscope.finetune.reinforcement import (
    AbstractRolloutProcessor,
    AgentOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)
from openai import AsyncOpenAI

TOOL = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression (+ - * /).",
    "parameters": {"type": "object", "required": ["expression"],
                   "properties": {"expression": {"type": "string"}}}}}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.USub: operator.neg}


def evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](evaluate(node.left), evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](evaluate(node.operand))
    raise ValueError("use numbers and + - * / only")


def calculator(arguments: str) -> str:
    try:
        value = evaluate(ast.parse(json.loads(arguments)["expression"], mode="eval").body)
    except Exception as exc:  # the model reads the error and may try again
        return f"error: {exc}"
    return str(int(value)) if float(value).is_integer() else str(round(value, 6))


class CalcXRolloutProcessor(AbstractRolloutProcessor):
    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        started = time.monotonic()
        res = input_data.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value())
        params = dict(input_data.sampling_params or {})
        max_turns = int(params.pop("max_turns", 3))
        params.pop("timeout", None)
        messages = list(input_data.messages)
        try:
            for _ in range(max_turns):
                reply = await client.chat.completions.create(
                    model=res.model_name, messages=messages, tools=input_data.tools or [TOOL],
                    **params)
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": calculator(call.function.arguments)})
        except Exception as exc:
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input_data.rollout_extra, reward_score=0.0,
            rollout_metrics={"latency": time.monotonic() - started}))
