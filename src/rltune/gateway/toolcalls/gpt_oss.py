"""``gpt_oss``: gpt-oss replies in OpenAI's harmony format, a run of messages
``<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>BODY<|end|>`` (later ones
after ``<|start|>assistant``). A ``commentary`` message to ``functions.NAME`` ending in
``<|call|>`` is a tool call whose body is the JSON arguments (kept as written); ``analysis``
bodies are the reasoning; ``final`` bodies (and ``commentary`` ones to nobody, the model's
preambles) are the content. The recipient may also stand in the role header
(``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>``), as gpt-oss's
chat template writes calls back; both are read.

Example:
    >>> text = ("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
    ...         "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
    ...         '{"x": 1}<|call|>')
    >>> out = GptOssToolParser().parse(text)
    >>> out.reasoning, [(c.name, c.arguments) for c in out.tool_calls]
    ('Need weather.', [('f', '{"x": 1}')])
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

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
END, CALL, RETURN = "<|end|>", "<|call|>", "<|return|>"
FUNCTIONS = "functions."


class GptOssToolParser(ToolParser):
    """gpt-oss (``gpt_oss``): harmony channels. The reply's whole structure is markup, so a
    streamed reply sends its content, reasoning and calls in the last chunk (only plain text
    before the first harmony token streams as it comes)."""

    name = "gpt_oss"
    start = CHANNEL
    markers = (START, CHANNEL, MESSAGE, CONSTRAIN, END, CALL, RETURN)
    whole_reply = True
    _channel = re.compile(r"<\|channel\|>\s*([A-Za-z_]+)")
    _recipient = re.compile(r"\bto=([^\s<]+)")
    _stops = (END, CALL, RETURN, START, CHANNEL)

    def holdback(self, text: str) -> int:
        return _holdback_any(text, (START, CHANNEL))

    def parse(self, text: str) -> ParsedOutput:
        opens = [at for at in (text.find(START), text.find(CHANNEL)) if at >= 0]
        if not opens or MESSAGE not in text:
            return ParsedOutput(content=text)
        at = min(opens)
        lead = text[:at][:-1] if text[:at].endswith("\n") else text[:at]
        content, reasoning = [lead] if lead else [], []
        calls: list[ParsedToolCall] = []
        pos = at
        while pos < len(text):
            head_end = text.find(MESSAGE, pos)
            if head_end < 0:
                return ParsedOutput(content=text, error="harmony message without <|message|>")
            header, body_at = text[pos:head_end], head_end + len(MESSAGE)
            stop, stop_at = min(((s, i) for s in self._stops
                                 if (i := text.find(s, body_at)) >= 0),
                                key=lambda hit: hit[1], default=("", len(text)))
            body = text[body_at:stop_at]
            pos = stop_at + (len(stop) if stop in (END, CALL, RETURN) else 0)
            err = self._message(header, body, content, reasoning, calls)
            if err:
                return ParsedOutput(content=text, error=err)
            rest = text[pos:].lstrip()
            if rest and not rest.startswith((START, CHANNEL)):
                return ParsedOutput(content=text,
                                    error=f"text after a harmony message: {rest[:40]!r}")
            pos = len(text) - len(rest)
        return ParsedOutput(content="\n".join(content) if (content or not calls) else None,
                            tool_calls=calls, reasoning="\n".join(reasoning) if reasoning
                            else None)

    def _message(self, header: str, body: str, content: list[str], reasoning: list[str],
                 calls: list[ParsedToolCall]) -> Union[str, None]:
        """File one message by its header; why it cannot be read, or None."""
        if header.startswith(START):
            header = header[len(START):]
            if not header.startswith("assistant"):
                return f"harmony message from {header.split('<')[0].strip()!r}, not assistant"
        channel = self._channel.search(header)
        recipient = self._recipient.search(header)
        if recipient:
            to = recipient.group(1)
            if not to.startswith(FUNCTIONS) or len(to) == len(FUNCTIONS):
                return f"call to {to!r}: only functions.NAME tools are served"
            err = _json_object_text(body)
            if err:
                return f"{to}: {err}"
            calls.append(ParsedToolCall(name=to[len(FUNCTIONS):], arguments=body))
        elif channel and channel.group(1) == "analysis":
            reasoning.append(body)
        else:  # final, or a commentary preamble
            content.append(body)
        return None

    def forced_prefix(self, name: Optional[str] = None) -> str:
        if name is None:
            return CHANNEL + "commentary to=" + FUNCTIONS
        return CHANNEL + "commentary to=" + FUNCTIONS + name + " " + CONSTRAIN + "json" + MESSAGE
