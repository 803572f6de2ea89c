"""Tool-call parsers: model output text → OpenAI ``tool_calls``, one parser per model family.

The built-in :class:`HermesToolParser` reads Qwen / Hermes style output::

    optional content
    <tool_call>
    {"name": "calculator", "arguments": {"expression": "2 + 3"}}
    </tool_call>

Malformed tool-call JSON is never an error: the parser returns the whole text as content and
says why in ``error`` (the gateway counts it). ``arguments`` is returned as the exact JSON text
the model wrote whenever the block has the canonical shape, so that a client sending the call
back renders (through a template that writes string arguments verbatim) to the same tokens.

Register parsers for other families with :func:`register_parser`.

Example:
    >>> p = get_parser("hermes")
    >>> out = p.parse('Let me compute.\\n<tool_call>\\n{"name": "calc", "arguments": '
    ...               '{"x": 1}}\\n</tool_call>')
    >>> out.content, out.tool_calls[0].name, out.tool_calls[0].arguments
    ('Let me compute.', 'calc', '{"x": 1}')
    >>> p.parse("<tool_call>{oops</tool_call>").error is not None
    True
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ParsedToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI's wire format has it
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")


@dataclass
class ParsedOutput:
    content: Optional[str]
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    error: Optional[str] = None  # why tool-call markup could not be parsed (content kept whole)


class ToolParser:
    """Base class. Subclasses define the markup and how to parse and force a call."""

    #: Text that opens a tool call; streaming holds content back from here on.
    start: str = ""

    def parse(self, text: str) -> ParsedOutput:  # pragma: no cover - interface
        raise NotImplementedError

    def forced_prefix(self, name: Optional[str] = None) -> str:
        """Assistant-text prefix that makes the next tokens a tool call (``tool_choice``)."""
        raise NotImplementedError  # pragma: no cover - interface

    def holdback(self, text: str) -> int:
        """How much of ``text`` may be streamed as content before tool markup could begin."""
        if not self.start:
            return len(text)
        at = text.find(self.start)
        if at >= 0:
            return at
        # keep back a tail that could be the beginning of the start marker
        for k in range(min(len(self.start) - 1, len(text)), 0, -1):
            if self.start.startswith(text[-k:]):
                return len(text) - k
        return len(text)


class HermesToolParser(ToolParser):
    """``<tool_call>{json}</tool_call>`` (Qwen2/2.5/3, Hermes, rltune's tiny models)."""

    start, end = "<tool_call>", "</tool_call>"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)

    def parse(self, text: str) -> ParsedOutput:
        at = text.find(self.start)
        if at < 0:
            return ParsedOutput(content=text)
        content = text[:at]
        content = content[:-1] if content.endswith("\n") else content
        calls: list[ParsedToolCall] = []
        for m in self._block.finditer(text, at):
            body = m.group(1).strip()
            if not m.group(0).endswith(self.end):
                return ParsedOutput(content=text, error="unterminated <tool_call> block")
            try:
                obj = json.loads(body)
            except json.JSONDecodeError as exc:
                return ParsedOutput(content=text, error=f"tool call is not valid JSON: {exc}")
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                return ParsedOutput(content=text, error='tool call lacks a string "name"')
            args = obj.get("arguments", obj.get("parameters", {}))
            if isinstance(args, str):  # some models emit arguments as a JSON string
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    return ParsedOutput(content=text, error="arguments string is not JSON")
            if not isinstance(args, dict):
                return ParsedOutput(content=text, error="arguments is not a JSON object")
            calls.append(ParsedToolCall(name=obj["name"], arguments=_raw_args(body, obj, args)))
        return ParsedOutput(content=content or None, tool_calls=calls)

    def forced_prefix(self, name: Optional[str] = None) -> str:
        if name is None:
            return self.start + "\n"
        # Stop before the space so the model samples ' {' itself: that keeps the tokens the
        # same as when the whole call is re-rendered from the conversation later.
        return self.start + '\n{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments":'


def _raw_args(body: str, obj: dict, args: dict) -> str:
    head = '{"name": ' + json.dumps(obj["name"], ensure_ascii=False) + ', "arguments": '
    if body.startswith(head) and body.endswith("}") and len(obj) == 2 and "arguments" in obj:
        raw = body[len(head):-1]
        try:
            if json.loads(raw) == args:
                return raw
        except json.JSONDecodeError:
            pass
    return json.dumps(args, ensure_ascii=False)


_PARSERS: dict[str, Callable[[], ToolParser]] = {"hermes": HermesToolParser}
# model_type (config.json) → parser name; unknown families fall back to hermes.
_FAMILIES: dict[str, str] = {"qwen2": "hermes", "qwen3": "hermes", "qwen2_moe": "hermes"}


def register_parser(name: str, factory: Callable[[], ToolParser], *,
                    model_types: tuple[str, ...] = ()) -> None:
    """Add a parser, optionally as the default for some ``config.model_type`` values."""
    _PARSERS[name] = factory
    for mt in model_types:
        _FAMILIES[mt] = name


def get_parser(name: str) -> ToolParser:
    """A parser by name (``hermes``); raises ``KeyError`` listing the known names."""
    try:
        return _PARSERS[name]()
    except KeyError:
        raise KeyError(f"unknown tool parser {name!r}; known: {sorted(_PARSERS)}") from None


def parser_for_model_type(model_type: Optional[str]) -> ToolParser:
    return get_parser(_FAMILIES.get(model_type or "", "hermes"))
