"""The ``general`` preset's rows: every kind, deterministic for a seed, and each answer
checkable by its reward (right answer 1, a wrong one or no answer line 0)."""

from __future__ import annotations

from rltune.sdk.general import KINDS, answer_score, general_reward, general_rows


def test_rows_cover_every_kind_and_repeat_for_a_seed():
    rows = general_rows(2 * len(KINDS), seed=7)
    assert {r["rollout_extra"]["kind"] for r in rows} == set(KINDS)
    assert rows == general_rows(2 * len(KINDS), seed=7)
    assert rows != general_rows(2 * len(KINDS), seed=8)
    for r in rows:
        assert r["messages"][0]["role"] == "system" and r["messages"][1]["role"] == "user"
        assert r["rollout_extra"]["solution"] == r["extra"]["answer"] != ""


def test_each_answer_scores_one_and_a_wrong_one_zero():
    for r in general_rows(len(KINDS), seed=0):
        answer = r["extra"]["answer"]
        assert answer_score(f"thinking… ### ANSWER: {answer} ###", answer) == 1.0, r
        assert answer_score(f"### ANSWER: {answer}x ###", answer) == 0.0, r
        assert answer_score(answer, answer) == 0.0  # no answer line: not scored right
    assert answer_score("### ANSWER: 1 ### then ### ANSWER: 12.0 ###", "12") == 1.0  # the last
    assert answer_score("### ANSWER: yellow ###", "YELLOW") == 0.0  # text is exact
    done = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "### ANSWER: 3 ###"}]
    assert general_reward([done, "### ANSWER: 4 ###"], ["3", "3"]) == [1.0, 0.0]
