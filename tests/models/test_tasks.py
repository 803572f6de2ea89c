"""Calculator task generators, the safe calculator, answer extraction and dataset rows."""

from __future__ import annotations

import json
import re

import pytest

from rltune.models.tasks import (
    CALCULATOR_TOOL,
    TaskConfig,
    calculate,
    extract_answer,
    is_correct,
    make_dataset_rows,
    run_calculator_tool,
    sample_tasks,
    split_of,
    write_jsonl,
)
from rltune.sdk.errors import ValidationError


def test_sampling_is_deterministic_per_seed():
    a = sample_tasks(50, "train", seed=7)
    assert a == sample_tasks(50, "train", seed=7)
    assert a != sample_tasks(50, "train", seed=8)


@pytest.mark.parametrize("digits", [1, 2])
def test_train_and_heldout_are_disjoint_across_seeds(digits):
    cfg = TaskConfig(digits=digits)
    train = {t.expression for s in range(3) for t in sample_tasks(200, "train", s, cfg)}
    held = {t.expression for s in range(3) for t in sample_tasks(40, "heldout", s, cfg)}
    assert train and held and not (train & held)
    assert all(split_of(e) == "heldout" for e in held)


def test_answers_match_the_calculator_and_respect_difficulty():
    cfg = TaskConfig(digits=1, ops=("+", "*"))
    for task in sample_tasks(100, "train", 0, cfg):
        assert calculate(task.expression) == task.answer
        assert task.op in ("+", "*") and 0 <= task.a <= 9 and 0 <= task.b <= 9
        assert task.expression in task.question


def test_mixed_lengths_make_short_operands_common():
    plain = sample_tasks(400, "train", 0, TaskConfig(digits=2))
    mixed = sample_tasks(400, "train", 0, TaskConfig(digits=2, mixed_lengths=True))
    short = [sum(t.a < 10 for t in ts) / len(ts) for ts in (plain, mixed)]
    assert short[0] < 0.2 and 0.35 < short[1] < 0.65
    assert all(0 <= t.a <= 99 and 0 <= t.b <= 99 for t in mixed)


def test_unique_heldout_runs_out_with_a_clear_error():
    with pytest.raises(ValidationError, match="distinct heldout questions"):
        sample_tasks(10_000, "heldout", 0, TaskConfig(digits=1), unique=True)


def test_bad_config_is_reported_with_field():
    with pytest.raises(ValidationError, match=r"TaskConfig.ops"):
        TaskConfig(ops=("**",))


@pytest.mark.parametrize(
    ("expr", "want"),
    [("37 * 4", "148"), ("(2 + 3) * -4", "-20"), ("7 / 2", "3.5"), ("8 / 2", "4"), ("-3", "-3")],
)
def test_calculate(expr, want):
    assert calculate(expr) == want


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "2 ** 999999",
        "x + 1",
        "open('f')",
        "1 / 0",
        "[1, 2]",
        "",
        "1 +",
        "9" * 30 + " * " + "9" * 30,
        "1" * 300,
        "True + 1",
    ],
)
def test_calculate_rejects_anything_but_arithmetic(expr):
    with pytest.raises(ValidationError) as err:
        calculate(expr)
    assert "calculator(expression=" in str(err.value)


def test_tool_runner_turns_errors_into_text():
    assert run_calculator_tool({"expression": "2+2"}) == "4"
    assert run_calculator_tool('{"expression": "2+"}').startswith("Error: not an arithmetic")
    assert run_calculator_tool("not json").startswith("Error: arguments are not JSON")
    assert run_calculator_tool('{"x": 1}').startswith("Error: arguments must be")


def test_extract_answer_and_is_correct():
    assert extract_answer("think ### ANSWER: 12 ### then ###ANSWER: -5###") == "-5"
    assert extract_answer("the answer is 12") is None
    assert extract_answer(None) is None
    assert is_correct("### ANSWER: 148 ###", "148")
    assert is_correct("### ANSWER: 148.0 ###", 148)
    assert not is_correct("### ANSWER: 147 ###", "148")


def test_dataset_rows_and_jsonl(tmp_path):
    rows = make_dataset_rows(20, "heldout", seed=1)
    assert len({r["messages"][1]["content"] for r in rows}) == 20
    row = rows[0]
    assert [m["role"] for m in row["messages"]] == ["system", "user"]
    assert row["tools"] == [CALCULATOR_TOOL]
    assert row["tools"][0]["function"]["parameters"]["required"] == ["expression"]
    for r in rows:
        expr = re.search(r"\d+ [-+*] \d+", r["messages"][1]["content"]).group(0)
        assert calculate(expr) == r["rollout_extra"]["solution"]
    path = write_jsonl(rows, tmp_path / "d" / "val.jsonl")
    back = [json.loads(line) for line in path.read_text().splitlines()]
    assert back == rows
