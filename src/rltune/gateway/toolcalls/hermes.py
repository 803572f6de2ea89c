"""``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Qwen2/2.5/3,
Hermes, rltune's tiny models). ``arguments`` keeps the exact JSON text the model wrote when the
block has the canonical shape, so a call sent back renders to the same tokens.

Example:
    >>> out = HermesToolParser().parse('<tool_call>\\n{"name": "f", "arguments": {"x": 1}}'
    ...                                '\\n</tool_call>')
    >>> out.tool_calls[0].name, out.tool_calls[0].arguments
    ('f', '{"x": 1}')
"""

from __future__ import annotations

import json
from typing import Optional, Union

from rltune.gateway.toolcalls.base import ParsedToolCall, TaggedBlockParser, _as_object


class HermesToolParser(TaggedBlockParser):
    """``<tool_call>{json}</tool_call>`` (Qwen2/2.5/3, Hermes, rltune's tiny models)."""

    name = "hermes"

    def call(self, body: str, closed: bool) -> Union[ParsedToolCall, str]:
        body = body.strip()
        if not closed:
            return "unterminated <tool_call> block"
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            return f"tool call is not valid JSON: {exc}"
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return 'tool call lacks a string "name"'
        args = _as_object(obj.get("arguments", obj.get("parameters", {})))
        if isinstance(args, str):
            return args
        return ParsedToolCall(name=obj["name"], arguments=_raw_args(body, obj, args))

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
