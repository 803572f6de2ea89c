"""Plain build progress lines (``rltune.models.progress_lines``); the piped CLI build of
test_partial.py checks them end to end."""

from __future__ import annotations

from rltune.models.progress_lines import line_progress


def _train(step, **kw):
    return {"phase": "train", "step": step, "max_steps": 900, "loss": 1.25,
            "curriculum": "copy", **kw}


def test_lines_for_notes_the_first_step_and_every_evaluation_only():
    lines: list[str] = []
    on_event = line_progress("nano", lines.append, every_s=3600)
    on_event({"phase": "note", "message": "resuming the nano build from step 240 (phase copy)"})
    for step in (241, 242):
        on_event(_train(step))
    on_event(_train(250, phase="eval", accuracy=0.25, tool_rate=0.5, tool_accuracy=0.9))
    on_event(_train(251))
    assert len(lines) == 3, lines
    assert lines[0] == "resuming the nano build from step 240 (phase copy)"
    assert lines[1].startswith("nano: step 241/900 copy loss 1.250 acc - tool -/- (")
    assert lines[2].startswith("nano: step 250/900 copy loss 1.250 acc 0.25 tool 0.50/0.90 (")
    assert lines[2].endswith(" s)")


def test_a_line_at_least_every_every_s_between_evaluations():
    lines: list[str] = []
    on_event = line_progress("nano", lines.append, every_s=0.0)
    for step in (1, 2, 3):
        on_event(_train(step))
    assert [line.split()[2] for line in lines] == ["1/900", "2/900", "3/900"]
