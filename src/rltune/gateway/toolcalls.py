"""Tool-call parsers: model output text → OpenAI ``tool_calls``, one parser per model family.

Built-in parsers (pick one by name with :func:`get_parser`, or by the model's
``config.model_type`` with :func:`parser_for_model_type`):

``hermes`` (Qwen2/2.5/3, Hermes, rltune's tiny models)::

    optional content
    <tool_call>
    {"name": "calculator", "arguments": {"expression": "2 + 3"}}
    </tool_call>

``llama3_json`` (Llama 3.1/3.2/3.3): a JSON object, optionally after ``<|python_tag|>``;
several are separated by ``;`` or newlines::

    {"name": "calculator", "parameters": {"expression": "2 + 3"}}

``mistral``: ``[TOOL_CALLS]`` and a JSON list (Mistral 7B v0.3, Mixtral, Nemo, Small 3), or
one ``[TOOL_CALLS]name[ARGS]{...}`` per call (tokenizer v11+: Mistral Small 3.2, Devstral)::

    [TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "2 + 3"}}]

``qwen3_coder`` (Qwen3-Coder's XML)::

    <tool_call>
    <function=calculator>
    <parameter=expression>
    2 + 3
    </parameter>
    </function>
    </tool_call>

Malformed tool-call markup is never an error: the parser returns the whole text as content and
says why in ``error`` (the gateway counts it). ``arguments`` is always JSON text of an object.
For Hermes, ``arguments`` is the exact JSON text the model wrote whenever the block has the
canonical shape, so that a client sending the call back renders (through a template that writes
string arguments verbatim) to the same tokens.

A parser's ``markers`` are special tokens its markup uses (Mistral's ``[TOOL_CALLS]``): the chat
service keeps them when it decodes completions, which otherwise drops special tokens.

Register parsers for other families with :func:`register_parser`.

Example:
    >>> p = get_parser("hermes")
    >>> out = p.parse('Let me compute.\\n<tool_call>\\n{"name": "calc", "arguments": '
    ...               '{"x": 1}}\\n</tool_call>')
    >>> out.content, out.tool_calls[0].name, out.tool_calls[0].arguments
    ('Let me compute.', 'calc', '{"x": 1}')
    >>> p.parse("<tool_call>{oops</tool_call>").error is not None
    True
    >>> llama = get_parser("llama3_json").parse('{"name": "calc", "parameters": {"x": 1}}')
    >>> llama.tool_calls[0].arguments
    '{"x": 1}'
"""

from __future__ import annotations

import json
import math
import random
import re
import string
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from rltune.names import TOOL_PARSERS, check_registry
from rltune.sdk.errors import ConfigError


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
    args = obj[key]
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


# -- hermes ----------------------------------------------------------------------------------


class HermesToolParser(ToolParser):
    """``<tool_call>{json}</tool_call>`` (Qwen2/2.5/3, Hermes, rltune's tiny models)."""

    name = "hermes"
    start, end = "<tool_call>", "</tool_call>"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)

    def parse(self, text: str) -> ParsedOutput:
        at = text.find(self.start)
        if at < 0:
            return ParsedOutput(content=text)
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
        return ParsedOutput(content=_content_before(text, at), tool_calls=calls)

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


# -- llama3_json -----------------------------------------------------------------------------


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


# -- mistral ---------------------------------------------------------------------------------


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
            try:
                obj, end = self._decoder.raw_decode(body)
            except json.JSONDecodeError as exc:
                return f"tool calls are not valid JSON: {exc}"
            if body[end:].strip():
                return f"text after the tool calls: {body[end:end + 40]!r}"
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
        try:
            args, end = self._decoder.raw_decode(raw)
        except json.JSONDecodeError as exc:
            return f"arguments of {m.group(1)} are not valid JSON: {exc}"
        if raw[end:].strip():
            return f"text after the tool call: {raw[end:end + 40]!r}"
        if not isinstance(args, dict):
            return "arguments is not a JSON object"
        cid = m.group(2)
        calls.append(ParsedToolCall(name=m.group(1), arguments=raw[:end],
                                    id=cid if _is_mistral_id(cid) else _mistral_id()))
        return None

    def forced_prefix(self, name: Optional[str] = None) -> str:
        if name is None:
            return self.start
        if self.style == "args":
            return self.start + name + "[ARGS]"
        # As Mistral 7B v0.3's template writes calls; stop before the arguments' space.
        return self.start + ' [{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments":'


def _is_mistral_id(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 9 and value.isascii() and value.isalnum()


# -- qwen3_coder -----------------------------------------------------------------------------


class Qwen3CoderToolParser(ToolParser):
    """Qwen3-Coder's XML calls: ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>
    ...</function></tool_call>``. A value is JSON if it parses as JSON, else the string."""

    name = "qwen3_coder"
    start, end = "<tool_call>", "</tool_call>"
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
    _function = re.compile(r"\s*<function=([^>\n]+)>(.*?)</function>\s*\Z", re.DOTALL)
    _param = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)

    def parse(self, text: str) -> ParsedOutput:
        at = text.find(self.start)
        if at < 0:
            return ParsedOutput(content=text)
        calls: list[ParsedToolCall] = []
        for m in self._block.finditer(text, at):
            body = m.group(1)
            # a block cut off after </function> (the model stopped there) is still whole
            if not m.group(0).endswith(self.end) and "</function>" not in body:
                return ParsedOutput(content=text, error="unterminated <tool_call> block")
            fm = self._function.match(body)
            if not fm:
                return ParsedOutput(content=text, error="tool call is not one "
                                    "<function=NAME>...</function> element")
            name, inner = fm.group(1).strip(), fm.group(2)
            params = list(self._param.finditer(inner))
            if len(params) != inner.count("<parameter="):
                return ParsedOutput(content=text, error=f"unterminated <parameter=...> in {name}")
            if self._param.sub("", inner).strip():
                return ParsedOutput(content=text, error=f"stray text inside <function={name}>")
            args = {p.group(1).strip(): _xml_value(p.group(2)) for p in params}
            calls.append(ParsedToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False)))
        return ParsedOutput(content=_content_before(text, at), tool_calls=calls)

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


# -- registry and model families ---------------------------------------------------------


class UnknownParserError(ConfigError, KeyError):
    """No parser by that name (also a ``KeyError``, as ``get_parser`` raised before)."""


_PARSERS: dict[str, Callable[[], ToolParser]] = {
    "hermes": HermesToolParser,
    "llama3_json": Llama3JsonToolParser,
    "mistral": MistralToolParser,
    "qwen3_coder": Qwen3CoderToolParser,
}
#: The parsers rltune ships (the job config's ``model.tool_call_parser`` accepts these).
BUILTIN_PARSERS: tuple[str, ...] = tuple(_PARSERS)
check_registry("tool-call parser", TOOL_PARSERS, _PARSERS)

# HF config.model_type → parser name. Qwen3-Coder (qwen3_moe) writes XML calls: choose
# qwen3_coder explicitly for it; the other Qwen3 models use hermes.
_FAMILIES: dict[str, str] = {
    "qwen2": "hermes", "qwen2_moe": "hermes", "qwen3": "hermes", "qwen3_moe": "hermes",
    "llama": "llama3_json",
    "mistral": "mistral", "mixtral": "mistral", "ministral": "mistral", "mistral3": "mistral",
}
# HF config.architectures → parser name, for a model_type the table above does not know.
_ARCHITECTURES: dict[str, str] = {
    "Qwen2ForCausalLM": "hermes", "Qwen2MoeForCausalLM": "hermes",
    "Qwen3ForCausalLM": "hermes", "Qwen3MoeForCausalLM": "hermes",
    "LlamaForCausalLM": "llama3_json",
    "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mistral",
    "MinistralForCausalLM": "mistral", "Mistral3ForConditionalGeneration": "mistral",
}

#: How to choose a parser explicitly (said by every selection error).
HOW_TO_CHOOSE = ("choose a parser explicitly: model.tool_call_parser in the job config, "
                 "`rltune serve --tool-parser NAME`, or Gateway(tool_parser=NAME)")


def register_parser(name: str, factory: Callable[[], ToolParser], *,
                    model_types: tuple[str, ...] = ()) -> None:
    """Add a parser, optionally as the default for some ``config.model_type`` values."""
    _PARSERS[name] = factory
    for mt in model_types:
        _FAMILIES[mt] = name


def known_families() -> dict[str, str]:
    """``config.model_type`` → parser name, as :func:`parser_for_model_type` uses it."""
    return dict(_FAMILIES)


def get_parser(name: str) -> ToolParser:
    """A parser by name (``hermes``, ``llama3_json``, ``mistral``, ``qwen3_coder``); raises
    :class:`UnknownParserError` (a ``ConfigError`` and a ``KeyError``) naming the known ones."""
    try:
        factory = _PARSERS[name]
    except (KeyError, TypeError):
        raise UnknownParserError(
            f"unknown tool-call parser {name!r}; known: {', '.join(sorted(_PARSERS))}",
            where="tool_call_parser", hint="use one of: " + ", ".join(sorted(_PARSERS))
        ) from None
    return factory()


def parser_name_for_model(model_type: Optional[str],
                          architectures: Optional[Sequence[str]] = ()) -> str:
    """The parser name for a model family; ``ConfigError`` for a family rltune does not know."""
    if model_type in _FAMILIES:
        return _FAMILIES[model_type]  # type: ignore[index]
    for arch in architectures or ():
        if arch in _ARCHITECTURES:
            return _ARCHITECTURES[arch]
    families = ", ".join(f"{mt} → {p}" for mt, p in sorted(_FAMILIES.items()))
    what = (f"model type {model_type!r}" if model_type else
            "a model that does not say its model_type")
    if architectures:
        what += f" (architectures {', '.join(architectures)})"
    raise ConfigError(
        f"no tool-call parser is known for {what}; known model families: {families}",
        where="tool_call_parser",
        hint=f"{HOW_TO_CHOOSE}; parsers: {', '.join(sorted(_PARSERS))}")


def parser_name_for_model_dir(path: Union[str, Path], override: Optional[str] = None) -> str:
    """The parser name for the saved model at ``path``: ``override`` if given (checked), else
    its family's from ``config.json``. Cheap: call it before loading the weights."""
    if override:
        get_parser(override)
        return override
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    return parser_name_for_model(config.get("model_type"), config.get("architectures") or ())


def parser_for_model_type(model_type: Optional[str],
                          architectures: Optional[Sequence[str]] = (), *,
                          override: Optional[str] = None) -> ToolParser:
    """The parser named ``override``, else the one for the model's family (see
    :func:`parser_name_for_model`; an unknown family is a ``ConfigError``, not a fallback)."""
    if override:
        return get_parser(override)
    return get_parser(parser_name_for_model(model_type, architectures))
