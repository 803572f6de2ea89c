"""Hermes tool-call parsing: valid, several, malformed, forced prefixes, stream holdback."""

from __future__ import annotations

import json

from rltune.gateway.toolcalls import HermesToolParser, get_parser, parser_for_model_type
from rltune.models.chat_template import render_chat


def test_parse_single_and_multiple_calls():
    p = HermesToolParser()
    text = ('Sure.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+2"}}'
            '\n</tool_call>\n<tool_call>\n{"name": "calculator", "arguments": '
            '{"expression": "3*4"}}\n</tool_call>')
    out = p.parse(text)
    assert out.error is None and out.content == "Sure."
    assert [c.name for c in out.tool_calls] == ["calculator", "calculator"]
    assert json.loads(out.tool_calls[1].arguments) == {"expression": "3*4"}
    assert out.tool_calls[0].id != out.tool_calls[1].id


def test_parsed_call_renders_back_byte_for_byte():
    p = HermesToolParser()
    gen = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "37 * 4"}}\n' \
          '</tool_call>'
    out = p.parse(gen)
    msg = {"role": "assistant", "content": out.content, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in out.tool_calls]}
    rendered = render_chat([{"role": "user", "content": "q"}, msg])
    assert "<|im_start|>assistant\n" + gen + "<|im_end|>" in rendered


def test_malformed_calls_come_back_as_content():
    p = HermesToolParser()
    for bad in ['<tool_call>\n{"name": "calc", "arguments": {1}}\n</tool_call>',
                '<tool_call>\n["not", "an", "object"]\n</tool_call>',
                '<tool_call>\n{"name": "calc", "arguments": 3}\n</tool_call>',
                '<tool_call>\n{"name": "calc", "arguments": {}}']:
        out = p.parse(bad)
        assert out.tool_calls == [] and out.content == bad and out.error


def test_forced_prefix_and_holdback_and_registry():
    p = get_parser("hermes")
    assert p.forced_prefix() == "<tool_call>\n"
    assert p.forced_prefix("calculator").endswith('"arguments":')
    assert p.holdback("hello <tool") == len("hello ")
    assert p.holdback("hello <tool_call>\n{") == len("hello ")
    assert p.holdback("plain text") == len("plain text")
    assert isinstance(parser_for_model_type("qwen2"), HermesToolParser)
