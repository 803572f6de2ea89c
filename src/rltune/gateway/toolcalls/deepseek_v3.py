"""``deepseek_v3``: DeepSeek-V3 / V3.1 calls between ``<｜tool▁calls▁begin｜>`` and
``<｜tool▁calls▁end｜>`` (full-width bars, U+2581 "▁"), one
``<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>`` per call. V3 (and R1) write
``function<｜tool▁sep｜>NAME`` and the arguments in a json code fence; V3.1 writes
``NAME<｜tool▁sep｜>{...}``. Both are read whatever the model; ``arguments`` is the JSON text as
written, since both templates write string arguments back verbatim.

Example:
    >>> text = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
    ...         '{"x": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    >>> [(c.name, c.arguments) for c in DeepSeekV3ToolParser().parse(text).tool_calls]
    [('f', '{"x": 1}')]
"""

from __future__ import annotations

import re
from typing import Any, Optional

from rltune.gateway.toolcalls.base import (
    ParsedOutput,
    ParsedToolCall,
    ToolParser,
    _json_object_text,
)

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
_FENCE = "\n```json\n"


class DeepSeekV3ToolParser(ToolParser):
    """DeepSeek-V3/V3.1 (``deepseek_v3``). ``style`` (``v3`` or ``v31``, read from the chat
    template by :meth:`bind`: a json code fence in it means ``v3``) only chooses the forced
    prefix of a named ``tool_choice``. Content before the calls is kept as written (the
    templates write it straight before ``<｜tool▁calls▁begin｜>``)."""

    name = "deepseek_v3"
    start = CALLS_BEGIN
    markers = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP)
    _v3 = re.compile(r"([^\n]+)\n```json\n(.*)\n```\s*\Z", re.DOTALL)

    def __init__(self, style: Optional[str] = None):
        if style not in (None, "v3", "v31"):
            raise ValueError(f"deepseek_v3 style must be 'v3' or 'v31', not {style!r}")
        self.style = style

    def bind(self, tokenizer: Any) -> None:
        template = getattr(tokenizer, "chat_template", None)
        if self.style is None and isinstance(template, str):
            self.style = "v3" if "```json" in template else "v31"

    def parse(self, text: str) -> ParsedOutput:
        at = text.find(CALLS_BEGIN)
        if at < 0:
            return ParsedOutput(content=text)
        calls: list[ParsedToolCall] = []
        pos = at + len(CALLS_BEGIN)
        while True:
            rest = text[pos:].lstrip()
            if not rest.startswith(CALL_BEGIN):
                break
            body_at = len(text) - len(rest) + len(CALL_BEGIN)
            end = text.find(CALL_END, body_at)
            if end < 0:
                return ParsedOutput(content=text, error="unterminated <｜tool▁call▁begin｜>")
            call = self._call(text[body_at:end])
            if isinstance(call, str):
                return ParsedOutput(content=text, error=call)
            calls.append(call)
            pos = end + len(CALL_END)
        tail = text[pos:].strip()
        if tail.startswith(CALLS_END):
            tail = tail[len(CALLS_END):].strip()
        if not calls:
            return ParsedOutput(content=text, error="<｜tool▁calls▁begin｜> without a call")
        if tail:
            return ParsedOutput(content=text, error=f"text after the tool calls: {tail[:40]!r}")
        return ParsedOutput(content=text[:at] or None, tool_calls=calls)

    def _call(self, body: str) -> ParsedToolCall | str:
        head, sep, tail = body.partition(SEP)
        if not sep:
            return "tool call without <｜tool▁sep｜>"
        fenced = self._v3.match(tail)
        if fenced:  # V3: TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```
            name, raw = fenced.group(1).strip(), fenced.group(2)
        else:  # V3.1: NAME<｜tool▁sep｜>ARGS
            name, raw = head.strip(), tail
        if not name:
            return "tool call without a function name"
        err = _json_object_text(raw)
        if err:
            return f"{name}: {err}"
        return ParsedToolCall(name=name, arguments=raw)

    def forced_prefix(self, name: Optional[str] = None) -> str:
        prefix = CALLS_BEGIN + CALL_BEGIN
        if name is None:
            return prefix
        if self.style == "v3":
            return prefix + "function" + SEP + name + _FENCE
        return prefix + name + SEP
