"""Synthetic warm-start transcripts: the tool/direct split and guessed direct answers."""

from __future__ import annotations

from rltune.models.tasks import TaskConfig, calculate, extract_answer
from rltune.models.transcripts import make_transcripts

CFG = TaskConfig(digits=1, heldout_percent=30)


def _question_and_answer(conv):
    expr = " ".join(conv[1]["content"].rstrip("?.").split()[-3:])  # "What is 3 * 4?" -> 3 * 4
    return expr, extract_answer(conv[-1]["content"])


def test_guessed_direct_answers_are_wrong_and_leave_the_split_alone():
    true = make_transcripts(200, seed=4, tool_fraction=0.4, config=CFG)
    guessed = make_transcripts(200, seed=4, tool_fraction=0.4, config=CFG, guess_direct=True)
    used_tool = [len(c) == 5 for c in true]
    assert used_tool == [len(c) == 5 for c in guessed]  # same draw of which ones use the tool
    assert 40 < sum(used_tool) < 120
    for t, g, tool in zip(true, guessed, used_tool, strict=True):
        assert t[1] == g[1]  # same question
        if tool:
            assert t == g  # tool transcripts keep the true result and answer
        else:
            expr, said = _question_and_answer(g)
            assert said is not None and said != calculate(expr), (expr, said)


def test_default_direct_answers_are_true():
    for conv in make_transcripts(50, seed=1, tool_fraction=0.0, config=CFG):
        expr, said = _question_and_answer(conv)
        assert said == calculate(expr)
