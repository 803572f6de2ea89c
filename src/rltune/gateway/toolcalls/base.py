"""What every tool-call parser shares: the parsed call and output, the ``ToolParser`` base,
the ``<tool_call>`` block parser (Hermes, Qwen3-Coder) and the small text helpers.

Example:
    >>> ParsedOutput(content="hi").tool_calls
    []
    >>> _partial_tail("abc<tool", "<tool_call>")
    5
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union


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
    reasoning: Optional[str] = None  # the <think> block of a reasoning model (chat.py)


class ToolParser:
    """Base class. Subclasses define the markup and how to parse and force a call."""

    #: Registered name (``hermes``, ...).
    name: str = ""
    #: Text that opens a tool call; streaming holds content back from here on.
    start: str = ""
    #: Special tokens of the markup that decoding must keep (decoding drops special tokens).
    markers: tuple[str, ...] = ()
    #: The markup structures every reply, tools or not (gpt-oss's harmony channels): the chat
    #: service parses replies to requests without tools too, for their content and reasoning.
    whole_reply: bool = False

    def parse(self, text: str) -> ParsedOutput:  # pragma: no cover - interface
        raise NotImplementedError

    def forced_prefix(self, name: Optional[str] = None) -> str:
        """Assistant-text prefix that makes the next tokens a tool call (``tool_choice``)."""
        raise NotImplementedError  # pragma: no cover - interface

    def bind(self, tokenizer: Any) -> None:
        """Adapt to the served model's tokenizer (the chat service calls this once)."""

    def holdback(self, text: str) -> int:
        """How much of ``text`` may be streamed as content before tool markup could begin."""
        if not self.start:
            return len(text)
        at = text.find(self.start)
        if at >= 0:
            return at
        return len(text) - _partial_tail(text, self.start)


def _partial_tail(text: str, marker: str) -> int:
    """Length of the longest tail of ``text`` that is a proper beginning of ``marker``."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-k:]):
            return k
    return 0


def _holdback_any(text: str, markers: Sequence[str]) -> int:
    """How much of ``text`` streams as content when any of ``markers`` opens tool markup."""
    found = [at for at in (text.find(m) for m in markers) if at >= 0]
    if found:
        return min(found)
    return len(text) - max((_partial_tail(text, m) for m in markers), default=0)


def _json_object_text(raw: str) -> Union[str, None]:
    """Why ``raw`` (a call's arguments as written) is not one JSON object, or None if it is."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON: {exc}"
    return None if isinstance(value, dict) else "arguments is not a JSON object"


def _content_before(text: str, at: int) -> Optional[str]:
    """Content in front of tool markup at ``at``: the newline before the markup belongs to it."""
    content = text[:at]
    content = content[:-1] if content.endswith("\n") else content
    return content or None


def _arguments(obj: dict, keys: Sequence[str]) -> Union[dict, str]:
    """The arguments object of a decoded call under the first present key, or why not."""
    key = next((k for k in keys if k in obj), None)
    if key is None:
        return f"tool call has no {' or '.join(repr(k) for k in keys)}"
    return _as_object(obj[key])


def _as_object(args: Any) -> Union[dict, str]:
    """Decoded call arguments as a dict (a JSON string is decoded), or why they are not one."""
    if isinstance(args, str):  # some models emit arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return "arguments string is not JSON"
    if not isinstance(args, dict):
        return "arguments is not a JSON object"
    return args


def special_token_ids(tokenizer: Any, texts: Iterable[str]) -> dict[int, str]:
    """Token id → text for each of ``texts`` that is a single token of ``tokenizer``."""
    out: dict[int, str] = {}
    for text in texts:
        try:
            ids = list(tokenizer.encode(text, add_special_tokens=False))
            if len(ids) == 1 and tokenizer.decode(ids, skip_special_tokens=False) == text:
                out[int(ids[0])] = text
        except Exception:  # a tokenizer that cannot say: treat the marker as absent
            continue
    return out


class TaggedBlockParser(ToolParser):
    """A parser whose calls are ``<tool_call>...</tool_call>`` blocks after optional content;
    a subclass turns one block's body into a call (or says why it cannot) in :meth:`call`."""

    start, end = "<tool_call>", "</tool_call>"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)

    def call(self, body: str, closed: bool) -> Union[ParsedToolCall, str]:
        """The call in a block's ``body`` (``closed``: it ended with :attr:`end`), or why not.
        """
        raise NotImplementedError  # pragma: no cover - interface

    def parse(self, text: str) -> ParsedOutput:
        at = text.find(self.start)
        if at < 0:
            return ParsedOutput(content=text)
        calls: list[ParsedToolCall] = []
        for m in self._block.finditer(text, at):
            call = self.call(m.group(1), m.group(0).endswith(self.end))
            if isinstance(call, str):
                return ParsedOutput(content=text, error=call)
            calls.append(call)
        return ParsedOutput(content=_content_before(text, at), tool_calls=calls)
