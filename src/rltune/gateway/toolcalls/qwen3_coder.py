"""``qwen3_coder``: Qwen3-Coder's XML calls, ``<tool_call><function=NAME><parameter=KEY>VALUE
</parameter>...</function></tool_call>``; a value is JSON if it parses as JSON, else the string.

Example:
    >>> xml = "<tool_call>\\n<function=f>\\n<parameter=x>\\n1\\n</parameter>\\n</function>"
    >>> [(c.name, json.loads(c.arguments)) for c in Qwen3CoderToolParser().parse(xml).tool_calls]
    [('f', {'x': 1})]
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Optional, Union

from rltune.gateway.toolcalls.base import ParsedToolCall, TaggedBlockParser


class Qwen3CoderToolParser(TaggedBlockParser):
    """Qwen3-Coder's XML calls: ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>
    ...</function></tool_call>``. A value is JSON if it parses as JSON, else the string."""

    name = "qwen3_coder"
    _function = re.compile(r"\s*<function=([^>\n]+)>(.*?)</function>\s*\Z", re.DOTALL)
    _param = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)

    def call(self, body: str, closed: bool) -> Union[ParsedToolCall, str]:
        # a block cut off after </function> (the model stopped there) is still whole
        if not closed and "</function>" not in body:
            return "unterminated <tool_call> block"
        fm = self._function.match(body)
        if not fm:
            return "tool call is not one <function=NAME>...</function> element"
        name, inner = fm.group(1).strip(), fm.group(2)
        params = list(self._param.finditer(inner))
        if len(params) != inner.count("<parameter="):
            return f"unterminated <parameter=...> in {name}"
        if self._param.sub("", inner).strip():
            return f"stray text inside <function={name}>"
        args = {p.group(1).strip(): _xml_value(p.group(2)) for p in params}
        return ParsedToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False))

    def forced_prefix(self, name: Optional[str] = None) -> str:
        if name is None:
            return self.start + "\n<function="
        return self.start + f"\n<function={name}>\n"


def _xml_value(raw: str) -> Any:
    value = raw[1:] if raw.startswith("\n") else raw
    value = value[:-1] if value.endswith("\n") else value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return value
    # NaN / Infinity are not JSON: keep the text
    return value if isinstance(parsed, float) and not math.isfinite(parsed) else parsed
