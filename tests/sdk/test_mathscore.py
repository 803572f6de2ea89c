"""Math rewards: TRL-style accuracy_reward and verl's default_compute_score, with math-verify
and with the module's own rules."""

from __future__ import annotations

import pytest

from rltune.sdk import mathscore
from rltune.sdk.mathscore import accuracy_reward, answers_match, default_compute_score


@pytest.fixture(params=["math-verify", "own"])
def checker(request, monkeypatch):
    if request.param == "own":
        monkeypatch.setattr(mathscore, "_math_verify", lambda: None)
    else:
        pytest.importorskip("math_verify")
    return request.param


@pytest.mark.parametrize(("pred", "gold"), [
    ("\\dfrac{1}{2}", "0.5"), ("1,000", "1000"), ("50\\%", "50"), ("x=5", "5"),
    ("\\frac12", "\\frac{1}{2}"), ("2\\sqrt{3}", "2\\sqrt3"), ("\\text{(B)}", "B"),
    ("\\left( 3 \\right)", "(3)"), ("7.", "7"), ("-.5", "-\\frac{1}{2}")])
def test_equal_answers_match(checker, pred, gold):
    assert answers_match(pred, gold)


@pytest.mark.parametrize(("pred", "gold"), [("3", "4"), ("\\frac{1}{3}", "0.34"), ("", "1")])
def test_different_answers_do_not(checker, pred, gold):
    assert not answers_match(pred, gold)


def test_accuracy_reward_has_trls_contract(checker):
    completions = [[{"role": "assistant", "content": "so \\boxed{\\dfrac{1}{2}}"}],
                   "The answer is 7", [{"role": "assistant", "content": "I think 4"}],
                   [{"role": "assistant", "content": "42"}]]
    solutions = ["$0.5$", "7", "The sum is 3 + 2. So \\boxed{5}", "no answer here at all."]
    assert accuracy_reward(completions, solutions) == [1.0, 1.0, 0.0, None]


@pytest.mark.parametrize(("source", "text", "truth", "score"), [
    ("openai/gsm8k", "48 / 2 = 24 clips. 48 + 24 = 72.\n#### 72", "72", 1.0),
    ("openai/gsm8k", "#### 1,234", "1234", 1.0),
    ("openai/gsm8k", "the answer is 72", "72", 0.0),  # no "####": verl's strict format
    ("lighteval/MATH", "so \\boxed{\\frac{2}{4}}", "\\frac12", 1.0),
    ("DigitalLearningGmbH/MATH-lighteval", "\\boxed{3}", "4", 0.0),
    ("HuggingFaceH4/MATH-500", "\\boxed{\\sqrt{2}}", "\\sqrt2", 1.0),
    ("numina_olympiads", "\\boxed{10}", "10", 1.0),
    ("searchR1_nq", "<answer>The Eiffel Tower</answer>", {"target": ["eiffel tower"]}, 1.0),
])
def test_default_compute_score_by_data_source(checker, source, text, truth, score):
    assert default_compute_score(source, text, truth) == score


def test_dapo_scores_plus_minus_one_and_unknown_sources_are_named():
    assert default_compute_score("math_dapo", "…\nAnswer: 42", "42") == {"score": 1.0,
                                                                         "acc": 1.0}
    assert default_compute_score("aime2024", "Answer: 41", "42")["score"] == -1.0
    with pytest.raises(ValueError, match="running code"):
        default_compute_score("codecontests", "", "")
    with pytest.raises(ValueError, match="supported: openai/gsm8k"):
        default_compute_score("my/own", "", "")


def test_both_wrap_as_plain_rewards():
    from rltune.sdk.data import RewardInput
    from rltune.sdk.plain import processor_for_function

    inp = RewardInput.model_validate({"ground_truth": "72", "agent_output": {
        "messages": [{"role": "user", "content": "?"},
                     {"role": "assistant", "content": "#### 72"}],
        "rollout_extra": {"data_source": "openai/gsm8k", "solution": "72"}}})
    verl = processor_for_function(default_compute_score)()
    assert verl.process(inp).reward.reward_score == 1.0
    trl = processor_for_function(accuracy_reward)()
    assert trl.process(inp).reward.reward_score == 1.0


def test_the_docs_list_every_data_source():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "coming-from.md").read_text()
    for source, scorer in mathscore.SCORERS.items():
        assert f"| `{source}` | `{scorer.__name__}` |" in docs, source
    for prefix, scorer in mathscore.PREFIX_SCORERS.items():
        assert f"| `{prefix}*` | `{scorer.__name__}` |" in docs, prefix
