"""``kimi_k2``: Kimi-K2 calls in a ``<|tool_calls_section_begin|>...<|tool_calls_section_end|>``
section, one ``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}
<|tool_call_end|>`` per call. ``functions.NAME:IDX`` is the call's id: Kimi's template writes
the id back there, so the id is kept as written, and so are the arguments (the template writes
string arguments verbatim).

Example:
    >>> text = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
    ...         '<|tool_call_argument_begin|>{"x": 1}<|tool_call_end|><|tool_calls_section_end|>')
    >>> [(c.name, c.id, c.arguments) for c in KimiK2ToolParser().parse(text).tool_calls]
    [('f', 'functions.f:0', '{"x": 1}')]
"""

from __future__ import annotations

import re
from typing import Optional, Union

from rltune.gateway.toolcalls.base import (
    ParsedOutput,
    ParsedToolCall,
    ToolParser,
    _holdback_any,
    _json_object_text,
)

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
# some Kimi-K2 checkpoints write the singular form now and then (vLLM's parser accepts both)
SECTION_BEGIN_ALT, SECTION_END_ALT = "<|tool_call_section_begin|>", "<|tool_call_section_end|>"
CALL_BEGIN, ARGS_BEGIN, CALL_END = ("<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                                    "<|tool_call_end|>")


class KimiK2ToolParser(ToolParser):
    """Kimi-K2 (``kimi_k2``). Content before the section is kept as written (the template
    writes it straight before ``<|tool_calls_section_begin|>``)."""

    name = "kimi_k2"
    start = SECTION_BEGIN
    markers = (SECTION_BEGIN, SECTION_END, SECTION_BEGIN_ALT, SECTION_END_ALT, CALL_BEGIN,
               ARGS_BEGIN, CALL_END)
    _id = re.compile(r"\s*(?:functions\.)?(\S+?):(\d+)\s*\Z")

    def holdback(self, text: str) -> int:
        return _holdback_any(text, (SECTION_BEGIN, SECTION_BEGIN_ALT))

    def parse(self, text: str) -> ParsedOutput:
        found = [(at, m) for m in (SECTION_BEGIN, SECTION_BEGIN_ALT) if (at := text.find(m)) >= 0]
        if not found:
            return ParsedOutput(content=text)
        at, marker = min(found)
        calls: list[ParsedToolCall] = []
        pos = at + len(marker)
        while True:
            rest = text[pos:].lstrip()
            if not rest.startswith(CALL_BEGIN):
                break
            head_at = len(text) - len(rest) + len(CALL_BEGIN)
            end = text.find(CALL_END, head_at)
            if end < 0:
                return ParsedOutput(content=text, error="unterminated <|tool_call_begin|>")
            call = self._call(text[head_at:end])
            if isinstance(call, str):
                return ParsedOutput(content=text, error=call)
            calls.append(call)
            pos = end + len(CALL_END)
        tail = text[pos:].strip()
        for end_marker in (SECTION_END, SECTION_END_ALT):
            if tail.startswith(end_marker):
                tail = tail[len(end_marker):].strip()
                break
        if not calls:
            return ParsedOutput(content=text, error=f"{marker} without a call")
        if tail:
            return ParsedOutput(content=text, error=f"text after the tool calls: {tail[:40]!r}")
        return ParsedOutput(content=text[:at] or None, tool_calls=calls)

    def _call(self, body: str) -> Union[ParsedToolCall, str]:
        head, sep, raw = body.partition(ARGS_BEGIN)
        if not sep:
            return "tool call without <|tool_call_argument_begin|>"
        m = self._id.match(head)
        if not m:
            return f"tool call id is not functions.NAME:INDEX: {head.strip()[:40]!r}"
        err = _json_object_text(raw)
        if err:
            return f"{m.group(1)}: {err}"
        return ParsedToolCall(name=m.group(1), arguments=raw, id=head.strip())

    def forced_prefix(self, name: Optional[str] = None) -> str:
        prefix = SECTION_BEGIN + CALL_BEGIN + "functions."
        if name is None:
            return prefix
        # the model writes the index itself: the call's number in the conversation
        return prefix + name + ":"
