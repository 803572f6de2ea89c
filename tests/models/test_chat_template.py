"""Chat template: tools, tool calls, tool results, generation prompt and prefix stability."""

from __future__ import annotations

import json

from rltune.models import load_tokenizer, render_chat
from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT, CalcTask
from rltune.models.transcripts import direct_transcript, tool_call_message, tool_transcript

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "37 * 4"}}\n</tool_call>'


def test_renders_tools_calls_and_results(tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    msgs = tool_transcript(CalcTask(37, "*", 4))
    text = tok.apply_chat_template(msgs, tools=[CALCULATOR_TOOL], tokenize=False)
    assert text == render_chat(msgs, [CALCULATOR_TOOL])
    assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT + "\n\n# Tools\n")
    assert "\n" + json.dumps(CALCULATOR_TOOL) + "\n</tools>" in text
    assert "<|im_start|>assistant\n" + CALL + "<|im_end|>\n" in text
    assert "<|im_start|>user\n<tool_response>\n148\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n### ANSWER: 148 ###<|im_end|>\n")


def test_dict_arguments_content_and_several_calls():
    msg = tool_call_message("1 + 2")
    msg["content"] = "Let me check."
    msg["tool_calls"].append(
        {
            "type": "function",
            "function": {"name": "calculator", "arguments": {"expression": "3 * 4"}},
        }
    )
    tools = [{"role": "tool", "content": "3"}, {"role": "tool", "content": "12"}]
    text = render_chat([{"role": "user", "content": "q"}, msg, *tools])
    assert (
        '<|im_start|>assistant\nLet me check.\n<tool_call>\n{"name": "calculator", '
        '"arguments": {"expression": "1 + 2"}}\n</tool_call>\n<tool_call>\n{"name": '
        '"calculator", "arguments": {"expression": "3 * 4"}}\n</tool_call><|im_end|>\n'
    ) in text
    # consecutive tool results share one user turn
    assert text.endswith(
        "<|im_start|>user\n<tool_response>\n3\n</tool_response>\n"
        "<tool_response>\n12\n</tool_response><|im_end|>\n"
    )


def test_no_tools_no_system_and_content_parts():
    assert render_chat(
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], add_generation_prompt=True
    ) == ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert render_chat([{"role": "system", "content": "S"}, {"role": "user", "content": "u"}]) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
    )
    # None content is rendered as nothing, never as the string "None"
    assert "None" not in render_chat([{"role": "assistant", "content": None}])


def _generated_text(msg):
    """What a model emits for an assistant message (the gateway parses it back into msg)."""
    return render_chat([msg]).removeprefix("<|im_start|>assistant\n").removesuffix("\n")


def test_prefix_stability_at_every_assistant_turn(tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    for msgs in (tool_transcript(CalcTask(91, "-", 71)), direct_transcript(CalcTask(2, "+", 3))):
        full_text = render_chat(msgs, [CALCULATOR_TOOL])
        full_ids = tok.apply_chat_template(
            msgs, tools=[CALCULATOR_TOOL], tokenize=True, return_dict=True
        )["input_ids"]
        for k, msg in enumerate(msgs):
            if msg["role"] != "assistant":
                continue
            prompt = render_chat(msgs[:k], [CALCULATOR_TOOL], add_generation_prompt=True)
            gen = _generated_text(msg)
            assert gen.endswith("<|im_end|>")
            assert full_text.startswith(prompt + gen)
            # token level too: prompt ids + generated ids are a prefix of the full ids
            ids = tok.encode(prompt, add_special_tokens=False) + tok.encode(
                gen, add_special_tokens=False
            )
            assert full_ids[: len(ids)] == ids


def test_assistant_tokens_mask(tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    out = tok.apply_chat_template(
        tool_transcript(CalcTask(37, "*", 4)),
        tools=[CALCULATOR_TOOL],
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    picked = tok.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert picked == CALL + "<|im_end|>" + "### ANSWER: 148 ###<|im_end|>"
