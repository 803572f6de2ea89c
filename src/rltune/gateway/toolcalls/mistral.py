"""``mistral``: ``[TOOL_CALLS]`` and a JSON list (tokenizers up to v7), or one
``[TOOL_CALLS]name[ARGS]{...}`` per call (v11+). Call ids are 9 letters and digits.

Example:
    >>> out = MistralToolParser().parse('[TOOL_CALLS] [{"name": "f", "arguments": {"x": 1}}]')
    >>> out.tool_calls[0].name, len(out.tool_calls[0].id)
    ('f', 9)
"""

from __future__ import annotations

import json
import random
import re
import string
from typing import Any, Optional

from rltune.gateway.toolcalls.base import (
    ParsedOutput,
    ParsedToolCall,
    ToolParser,
    _arguments,
    _content_before,
    special_token_ids,
)


def _mistral_id() -> str:
    """Mistral's templates require tool-call ids of exactly 9 letters and digits."""
    return "".join(random.choices(string.ascii_letters + string.digits, k=9))


class MistralToolParser(ToolParser):
    """Mistral: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`` (tokenizers up to
    v7: Mistral 7B v0.3, Mixtral, Nemo, Small 3/3.1) or one ``[TOOL_CALLS]name[ARGS]{...}`` per
    call (v11+: Small 3.2, Devstral, Magistral). Both are parsed whatever the tokenizer;
    ``style`` (``json`` or ``args``, read from the tokenizer by :meth:`bind`: a single
    ``[ARGS]`` token means ``args``) only chooses the forced prefix of a named ``tool_choice``.
    Call ids are 9 letters and digits, as Mistral's chat templates demand.
    """

    name = "mistral"
    start = "[TOOL_CALLS]"
    markers = ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]")
    _v11 = re.compile(r"\s*([A-Za-z0-9_.:\-]+)\s*"  # name [CALL_ID]id [ARGS] (both optional)
                      r"(?:\[CALL_ID\]\s*([A-Za-z0-9]+)\s*)?(?:\[ARGS\])?\s*")
    _decoder = json.JSONDecoder()

    def __init__(self, style: Optional[str] = None):
        if style not in (None, "json", "args"):
            raise ValueError(f"mistral style must be 'json' or 'args', not {style!r}")
        self.style = style

    def bind(self, tokenizer: Any) -> None:
        if self.style is None:
            self.style = "args" if special_token_ids(tokenizer, ["[ARGS]"]) else "json"

    def parse(self, text: str) -> ParsedOutput:
        at = text.find(self.start)
        if at < 0:
            return ParsedOutput(content=text)
        calls: list[ParsedToolCall] = []
        for seg in text[at + len(self.start):].split(self.start):
            err = self._segment(seg, calls)
            if err:
                return ParsedOutput(content=text, error=err)
        return ParsedOutput(content=_content_before(text, at), tool_calls=calls)

    def _segment(self, seg: str, calls: list[ParsedToolCall]) -> Optional[str]:
        body = seg.strip()
        if body.startswith(("[", "{")):  # JSON list (or one object) of calls
            obj, _, err = self._whole_json(body, "tool calls are", "tool calls")
            if err:
                return err
            items = obj if isinstance(obj, list) else [obj]
            if not items:
                return "empty tool-call list"
            for item in items:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    return 'tool call lacks a string "name"'
                args = _arguments(item, ("arguments", "parameters"))
                if isinstance(args, str):
                    return args
                cid = item.get("id")
                calls.append(ParsedToolCall(
                    name=item["name"], arguments=json.dumps(args, ensure_ascii=False),
                    id=cid if _is_mistral_id(cid) else _mistral_id()))
            return None
        m = self._v11.match(seg)
        if not m or not m.group(1):
            return f"[TOOL_CALLS] is followed by neither a JSON list nor name[ARGS]: {body[:40]!r}"
        raw = seg[m.end():].strip()
        args, end, err = self._whole_json(raw, f"arguments of {m.group(1)} are", "tool call")
        if err:
            return err
        if not isinstance(args, dict):
            return "arguments is not a JSON object"
        cid = m.group(2)
        calls.append(ParsedToolCall(name=m.group(1), arguments=raw[:end],
                                    id=cid if _is_mistral_id(cid) else _mistral_id()))
        return None

    def _whole_json(self, text: str, what: str, after: str) -> tuple[Any, int, Optional[str]]:
        """(the JSON value that is all of ``text``, where it ends, None), or why it is not."""
        try:
            value, end = self._decoder.raw_decode(text)
        except json.JSONDecodeError as exc:
            return None, 0, f"{what} not valid JSON: {exc}"
        if text[end:].strip():
            return None, 0, f"text after the {after}: {text[end:end + 40]!r}"
        return value, end, None

    def forced_prefix(self, name: Optional[str] = None) -> str:
        if name is None:
            return self.start
        if self.style == "args":
            return self.start + name + "[ARGS]"
        # As Mistral 7B v0.3's template writes calls; stop before the arguments' space.
        return self.start + ' [{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments":'


def _is_mistral_id(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 9 and value.isascii() and value.isalnum()
