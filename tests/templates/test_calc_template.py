"""The ``calc`` workspace template's reward (its learning is tests/trainer/test_learning.py)."""

from __future__ import annotations

import pytest

from rltune.sdk import AgentOutput, RewardInput
from rltune.templates import TEMPLATES_DIR


@pytest.mark.parametrize("text,correct,form", [
    ("7 * 8 = 56\n### ANSWER: 56 ###", 1.0, 1.0),
    ("### ANSWER: 56 ###  \n", 1.0, 1.0),          # trailing whitespace is still the end
    ("### ANSWER: 57 ###", 0.0, 1.0),              # the form, the wrong number
    ("### ANSWER: 56 ### ### ###", 0.0, 0.0),      # text after the answer is not paid
    ("### ANSWER: 56 ### and then ### ANSWER: 56 ###", 1.0, 1.0),
    ("56", 0.0, 0.0),
])
async def test_the_answer_counts_only_where_it_ends_the_final_message(
    text, correct, form, workspace_reward
):
    from rltune.sdk.processors import call_process

    messages = [{"role": "user", "content": "What is 7 * 8?"},
                {"role": "assistant", "content": text}]
    data = RewardInput(ground_truth="56", agent_output=AgentOutput(messages=messages))
    out = (await call_process(workspace_reward(TEMPLATES_DIR / "calc", "CalcReward"), data)).reward
    assert out.reward_metrics == {"correct": correct, "format": form}
    assert out.reward_score == correct  # format is a metric (weight 0)
