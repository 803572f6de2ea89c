"""The Bailian demo's reward (``DemoRewardProcessor``): the ``### ANSWER: x ###`` of the last
message against ``ground_truth`` (exactly, or numerically within 1%), with metrics."""

from __future__ import annotations

import re

from dashscope.finetune.reinforcement import (
    AbstractRewardProcessor,
    Reward,
    RewardInput,
    RewardOutput,
)

ANSWER = re.compile(r"###\s*ANSWER:\s*(.+?)\s*###")


def last_answer(input_data: RewardInput) -> str | None:
    messages = input_data.agent_output.messages or []
    text = str(messages[-1].get("content") or "") if messages else ""
    found = ANSWER.findall(text)
    return found[-1] if found else None


def matches(answer: str, truth: str) -> bool:
    if answer.strip() == truth.strip():
        return True
    try:
        a, b = float(answer), float(truth)
    except ValueError:
        return False
    return abs(a - b) <= 1e-2 * max(1.0, abs(b))


class DemoRewardProcessor(AbstractRewardProcessor):
    async def process(self, input_data: RewardInput) -> RewardOutput:
        answer = last_answer(input_data)
        right = answer is not None and matches(answer, str(input_data.ground_truth))
        return RewardOutput(reward=Reward(
            reward_score=float(right),
            reward_metrics={"accuracy": float(right), "format": float(answer is not None)}))
