"""``llama3_json``: Llama 3.1/3.2/3.3 JSON calls, optionally after ``<|python_tag|>``.

Example:
    >>> out = Llama3JsonToolParser().parse('{"name": "f", "parameters": {"x": 1}}')
    >>> out.tool_calls[0].arguments
    '{"x": 1}'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Optional

from rltune.gateway.toolcalls.base import (
    ParsedOutput,
    ParsedToolCall,
    ToolParser,
    _arguments,
    _content_before,
    _partial_tail,
)


class Llama3JsonToolParser(ToolParser):
    """Llama 3.1/3.2/3.3 JSON tool calls: ``{"name": ..., "parameters": {...}}``.

    A call starts at ``<|python_tag|>`` or at a line that opens with ``{"name"`` (or with
    ``{"type": "function", "name"``, as Llama 3.2 1B/3B often write it); from there on the
    text must be calls only, separated by ``;``, spaces or newlines. ``parameters`` and
    ``arguments`` are both accepted.
    """

    name = "llama3_json"
    start = "<|python_tag|>"
    _open = re.compile(r'\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:')
    #: how a call's first key can begin (``rest`` of a line after ``{``, spaces squeezed)
    _heads = ('"name"', '"type": "function", "name"')
    _decoder = json.JSONDecoder()

    def _line_starts(self, text: str) -> Iterable[int]:
        yield 0
        at = text.find("\n")
        while at >= 0:
            yield at + 1
            at = text.find("\n", at + 1)

    def _find(self, text: str, *, partial: bool) -> int:
        """Where call markup begins (its line's start), or -1; ``partial``: could still begin."""
        tag = text.find(self.start)
        for p in self._line_starts(text):
            if tag >= 0 and p > tag:
                break
            q = p
            while q < len(text) and text[q] in " \t":
                q += 1
            if q == len(text):
                if partial:
                    return p
                continue
            if text[q] != "{":
                continue
            if self._open.match(text, q):
                return p
            if partial:  # '{', '{ "na', '{"name" ', '{"type": "fun': not decided yet
                rest = re.sub(r"\s*([:,])\s*", r"\1 ", text[q + 1:].lstrip())
                for key in self._heads:
                    if key.startswith(rest) or (rest.startswith(key)
                                                and not rest[len(key):].strip()):
                        return p
        return tag

    def holdback(self, text: str) -> int:
        at = self._find(text, partial=True)
        if at >= 0:
            return at
        return len(text) - _partial_tail(text, self.start)

    def parse(self, text: str) -> ParsedOutput:
        at = self._find(text, partial=False)
        if at < 0:
            return ParsedOutput(content=text)
        pos = at
        calls: list[ParsedToolCall] = []
        while True:
            while True:  # separators: ';', white space, <|python_tag|> before a call
                if pos < len(text) and text[pos] in " \t\r\n;":
                    pos += 1
                elif text.startswith(self.start, pos):
                    pos += len(self.start)
                else:
                    break
            if pos == len(text):
                break
            if text[pos] != "{":
                what = "text after the tool call" if calls else "not a JSON tool call"
                return ParsedOutput(content=text, error=f"{what}: {text[pos:pos + 40]!r}")
            try:
                obj, end = self._decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                return ParsedOutput(content=text, error=f"tool call is not valid JSON: {exc}")
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                return ParsedOutput(content=text, error='tool call lacks a string "name"')
            args = _arguments(obj, ("parameters", "arguments"))
            if isinstance(args, str):
                return ParsedOutput(content=text, error=args)
            calls.append(ParsedToolCall(name=obj["name"],
                                        arguments=json.dumps(args, ensure_ascii=False)))
            pos = end
        if not calls:
            return ParsedOutput(content=text, error="tool call marker without a call")
        return ParsedOutput(content=_content_before(text, at), tool_calls=calls)

    def forced_prefix(self, name: Optional[str] = None) -> str:
        # The Llama 3.1 template writes calls as {"name": "f", "parameters": {...}}; stop
        # before the space, as the Hermes parser does, so the model samples ' "f"' / ' {'.
        if name is None:
            return '{"name":'
        return '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "parameters":'
