"""Multi-step calculator tasks: questions, chains, splits, transcripts and the demo recipe."""

from __future__ import annotations

import re

import pytest

from rltune.models.multistep import (
    MultiStepConfig,
    MultiStepTask,
    make_multistep_rows,
    multistep_transcript,
    sample_multistep,
    steps_right,
)
from rltune.models.recipes import recipe_for
from rltune.models.registry import model_name
from rltune.models.tasks import calculate, extract_answer, split_of
from rltune.paths import check_model
from rltune.sdk.errors import ValidationError

_QUESTION = re.compile(
    r"^Start with \d+\. (Add|Subtract|Multiply by) \d+(, then (add|subtract|multiply by) \d+)*\.$"
)


def test_the_issue_phrasing_and_its_chain():
    t = MultiStepTask(17, (("+", 25), ("*", 3), ("-", 9)))
    assert t.question == "Start with 17. Add 25, then multiply by 3, then subtract 9."
    assert t.expressions == ("17 + 25", "42 * 3", "126 - 9")
    assert [calculate(e) for e in t.expressions] == list(t.values)
    assert t.answer == "117"


def test_sampled_chains_have_2_to_4_calls_operands_2_to_99_and_bounded_results():
    cfg = MultiStepConfig()
    tasks = sample_multistep(300, "train", seed=1, config=cfg)
    assert {len(t.steps) for t in tasks} == {2, 3, 4}
    assert all(_QUESTION.match(t.question) for t in tasks), tasks[0].question
    operands = [t.start for t in tasks] + [n for t in tasks for _, n in t.steps]
    assert min(operands) == 2 and max(operands) == 99
    assert {op for t in tasks for op, _ in t.steps} == {"+", "-", "*"}
    assert all(abs(int(v)) <= cfg.max_value for t in tasks for v in t.values)
    assert sample_multistep(20, "train", seed=1) == tasks[:20]  # deterministic from the seed


def test_splits_never_share_a_question_and_held_out_rows_are_distinct():
    train = {t.question for t in sample_multistep(400, "train", seed=0)}
    held = [t.question for t in sample_multistep(100, "heldout", seed=5)]
    assert not train & set(held) and len(set(held)) == len(held)
    assert all(split_of(q) == "heldout" for q in held)


def test_a_row_carries_the_answer_and_every_calls_result():
    row = make_multistep_rows(1, "heldout", seed=2)[0]
    assert row["tools"][0]["function"]["name"] == "calculator"
    extra = row["rollout_extra"]
    assert extra["solution"] == extra["steps"][-1]


def test_the_transcript_calls_each_step_on_the_previous_result_then_answers():
    t = MultiStepTask(5, (("*", 12), ("-", 70)))
    msgs = multistep_transcript(t)
    calls = [m["tool_calls"][0]["function"]["arguments"] for m in msgs if m.get("tool_calls")]
    assert calls == ['{"expression": "5 * 12"}', '{"expression": "60 - 70"}']
    assert [m["content"] for m in msgs if m["role"] == "tool"] == ["60", "-10"]
    assert extract_answer(msgs[-1]["content"]) == "-10"


def test_steps_right_counts_the_right_results_in_order_from_the_first():
    t = MultiStepTask(5, (("+", 3), ("*", 2), ("-", 4)))
    msgs = multistep_transcript(t)
    assert steps_right(msgs, list(t.values)) == 3
    assert steps_right(msgs[:5], list(t.values)) == 1  # stopped after one call
    assert steps_right(msgs, ["8", "17", "12"]) == 1  # the second is wrong: no later credit


@pytest.mark.parametrize(("field", "value"), [("max_steps", 9), ("low", 100), ("ops", ("/",)),
                                              ("max_value", 5), ("heldout_percent", 0)])
def test_a_bad_config_is_refused_by_name(field, value):
    with pytest.raises(ValidationError, match=field if field != "low" else "high"):
        MultiStepConfig(**{field: value})


def test_the_multistep_recipe_fine_tunes_nano_and_names_its_model():
    recipe = recipe_for("nano", "multistep")
    assert recipe.base == "nano" and isinstance(recipe.config.task, MultiStepConfig)
    assert recipe.config.max_turns == recipe.config.task.max_steps + 1
    assert model_name("nano", 0, "multistep") == "nano-multistep"
    assert model_name("nano", 2, "multistep") == "nano-multistep-seed2"
    with pytest.raises(ValidationError, match="no multistep recipe for size 'small'"):
        recipe_for("small", "multistep")
    with pytest.raises(ValidationError, match="unknown demo task"):
        recipe_for("nano", "chess")


def test_nano_multistep_resolves_as_a_demo_model(tmp_path):
    source = check_model("nano-multistep", tmp_path)
    assert source.kind == "demo" and source.path is None


def test_a_built_nano_multistep_is_found_under_its_own_name(tmp_path):
    from rltune.models.factory import META_FILE
    from rltune.models.registry import ensure_demo_model, resolve_model
    from rltune.paths import models_home

    for name in ("nano", "nano-multistep"):  # two cached builds: each found by its own name
        (models_home(tmp_path) / name).mkdir(parents=True)
        (models_home(tmp_path) / name / META_FILE).write_text("{}")
    built = ensure_demo_model("nano", home=tmp_path, task="multistep")
    assert built == models_home(tmp_path) / "nano-multistep"
    assert ensure_demo_model("nano", home=tmp_path) == models_home(tmp_path) / "nano"
    (built / "config.json").write_text("{}")
    assert resolve_model("nano-multistep", tmp_path) == built
