"""The calculator agent loop and the parsing of generated assistant text."""

from __future__ import annotations

import json

from rltune.models import load_tokenizer, render_chat
from rltune.models.agent import Episode, _step, parse_assistant_text, run_episodes, summarize
from rltune.models.tasks import CALCULATOR_TOOL, CalcTask, task_to_row

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "37 * 4"}}\n</tool_call>'


def test_parse_tool_call_renders_back_byte_exact():
    for text in (CALL, "Let me use the tool.\n" + CALL, CALL + "\n" + CALL.replace("37", "2")):
        msg = parse_assistant_text(text)
        assert msg["tool_calls"][0]["function"]["name"] == "calculator"
        assert render_chat([msg]) == "<|im_start|>assistant\n" + text + "<|im_end|>\n"
    assert json.loads(parse_assistant_text(CALL)["tool_calls"][0]["function"]["arguments"]) == {
        "expression": "37 * 4"
    }


def test_parse_plain_and_malformed():
    assert parse_assistant_text("### ANSWER: 3 ###") == {
        "role": "assistant",
        "content": "### ANSWER: 3 ###",
    }
    assert parse_assistant_text("<tool_call>\n{not json}\n</tool_call>") is None
    assert parse_assistant_text("<tool_call> unterminated") is None


def test_step_executes_the_calculator_and_scores_the_answer():
    ep = Episode(messages=task_to_row(CalcTask(37, "*", 4))["messages"], solution="148")
    assert _step(ep, CALL, finished=True) is True
    assert ep.messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "148"}
    assert _step(ep, "### ANSWER: 148 ###", finished=True) is False
    assert ep.correct and ep.used_tool and ep.answer == "148" and ep.finish == "answer"
    wrong = Episode(messages=[], solution="148")
    _step(wrong, "### ANSWER: 150 ###", finished=True)
    assert not wrong.correct and not wrong.used_tool
    s = summarize([ep, wrong])
    assert s["accuracy"] == 0.5 and s["tool_rate"] == 0.5 and s["tool_accuracy"] == 1.0


def test_run_episodes_on_the_tiny_model_is_seeded(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = load_tokenizer(tiny_model_dir)
    rows = [task_to_row(CalcTask(a, "+", 1)) for a in range(4)]
    a = run_episodes(model, tok, rows, max_new_tokens=8, seed=3)
    b = run_episodes(model, tok, rows, max_new_tokens=8, seed=3)
    assert [e.messages for e in a] == [e.messages for e in b]
    for ep in a:
        assert 1 <= ep.n_llm_calls <= 3 and ep.tools == [CALCULATOR_TOOL]
        assert ep.messages[-1]["role"] in ("assistant", "tool")
        assert ep.finish in ("answer", "length", "max_turns", "bad_tool_call")
