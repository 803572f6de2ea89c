"""``glm45``: GLM-4.5 / 4.6 / 4.7 calls, ``<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE
</arg_value>...</tool_call>`` (GLM-4.5 and 4.6 put a newline after the name and after each tag
pair, GLM-4.7 none); a value is JSON if it parses as JSON, else the string, as GLM's template
writes it (``v | tojson`` unless ``v`` is a string).

Example:
    >>> text = "<tool_call>f\\n<arg_key>x</arg_key>\\n<arg_value>1</arg_value>\\n</tool_call>"
    >>> [(c.name, json.loads(c.arguments)) for c in Glm45ToolParser().parse(text).tool_calls]
    [('f', {'x': 1})]
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Optional, Union

from rltune.gateway.toolcalls.base import ParsedToolCall, TaggedBlockParser


class Glm45ToolParser(TaggedBlockParser):
    """GLM-4.5/4.6/4.7 (``glm4_moe``): ``<tool_call>NAME`` then ``<arg_key>``/``<arg_value>``
    pairs, then ``</tool_call>``; several calls are several blocks."""

    name = "glm45"
    markers = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
               "</arg_value>")
    _head = re.compile(r"\s*([^\s<>]+)")
    _pair = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)

    def call(self, body: str, closed: bool) -> Union[ParsedToolCall, str]:
        if not closed:
            return "unterminated <tool_call> block"
        head = self._head.match(body)
        if not head:
            return "tool call has no function name after <tool_call>"
        name, pos = head.group(1), head.end()
        args: dict[str, Any] = {}
        while True:
            m = self._pair.match(body, pos)
            if not m:
                break
            args[m.group(1).strip()] = _glm_value(m.group(2))
            pos = m.end()
        if body[pos:].strip():
            return f"stray text in the {name} call: {body[pos:pos + 40].strip()!r}"
        return ParsedToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False))

    def forced_prefix(self, name: Optional[str] = None) -> str:
        if name is None:
            return self.start
        return self.start + name + "\n"


def _glm_value(raw: str) -> Any:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    # NaN / Infinity are not JSON: keep the text
    return raw if isinstance(parsed, float) and not math.isfinite(parsed) else parsed
