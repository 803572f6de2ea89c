"""One chat-completions call: render → engine → parse → OpenAI response (+ capture records).

Prompts are rendered with the model's own chat template (tools included) and tokenized once
(a prompt sent again, as GRPO sends each one n times, comes from :mod:`.promptcache`);
those ids go to the engine and into the capture, so the trainer sees exactly what the model saw.
``tool_choice="required"`` (or a named function) appends the parser's forced prefix (e.g.
``<tool_call>\\n``) to the prompt: those tokens are part of the prompt, not sampled.

``chat_template_kwargs`` (the job's ``model.chat_template_kwargs``, then the request's own,
vLLM-style, key by key) go to the template, e.g. ``enable_thinking`` for Qwen3. For a template
that knows ``<think>`` blocks, the text before ``</think>`` becomes ``reasoning_content``; the
completion's token ids (which the trainer sees) keep all of it, and a client that sends the
message back with its ``reasoning_content`` gets it rendered by the template again.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from rltune.engine.base import Engine
from rltune.engine.types import Completion, GenerationRequest, SamplingParams
from rltune.gateway.capture import CapturedCall
from rltune.gateway.promptcache import PromptCache
from rltune.gateway.protocol import (
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    ChoiceLogprobs,
    NamedToolChoice,
    ResponseMessage,
    TokenLogprobOut,
    TopLogprobOut,
    Usage,
)
from rltune.gateway.toolcalls import ParsedOutput, ToolParser, special_token_ids
from rltune.sdk.errors import ValidationError


@dataclass
class Prepared:
    """A validated request, rendered to ids and sampling parameters."""

    request: ChatCompletionRequest
    messages: list[dict[str, Any]]
    tools: Optional[list[dict[str, Any]]]
    prefix: str
    prompt_ids: list[int]
    sampling: SamplingParams
    parse_tools: bool
    started: float = field(default_factory=time.perf_counter)
    #: the rendered prompt ends inside an open ``<think>`` (templates that open it themselves)
    thinking: bool = False
    #: the caller's session (its rollout or prompt group): the engine replica it sticks to
    session: Optional[str] = None


class ChatService:
    """Turns OpenAI chat requests into engine calls and engine output into OpenAI responses."""

    def __init__(self, engine: Engine, parser: ToolParser, *, model_name: Optional[str] = None,
                 chat_template_kwargs: Optional[dict[str, Any]] = None):
        self.engine = engine
        self.tok = engine.tokenizer
        self.parser = parser
        self.template_kwargs = dict(chat_template_kwargs or {})
        self.reasoning = _template_thinks(self.tok)
        parser.bind(self.tok)
        # special tokens of the parser's markup (Mistral's [TOOL_CALLS]) survive decoding
        self.marker_ids = special_token_ids(self.tok, parser.markers)
        self.string_arguments = _template_takes_string_arguments(self.tok)
        self.model_name = model_name or engine.model_name
        self.stats = {"requests": 0, "malformed_tool_calls": 0, "tool_calls": 0,
                      "spliced_prompts": 0}
        #: rendered templates and their ids, reused when a prompt is sent again (GRPO's n)
        self.cache = PromptCache()

    # -- request side -----------------------------------------------------------------------

    def prepare(self, req: ChatCompletionRequest,
                history: Sequence[CapturedCall] = ()) -> Prepared:
        """Validate and render ``req``. ``history`` = this rollout's earlier captured calls."""
        if req.presence_penalty or req.frequency_penalty or req.logit_bias:
            raise ValidationError("presence_penalty, frequency_penalty and logit_bias are not "
                                  "supported by this engine", where="body",
                                  hint="leave them unset (or 0)")
        json_schema = self._json_constraint(req)
        messages = [_message_dict(m, self.string_arguments) for m in req.messages]
        tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
        choice = req.tool_choice or "auto"
        prefix = ""
        if tools and choice == "required":
            prefix = self.parser.forced_prefix()
        elif isinstance(choice, NamedToolChoice):
            name = choice.function.get("name")
            if not tools or name not in {t["function"]["name"] for t in tools}:
                raise ValidationError(f"tool_choice names function {name!r}, which is not in "
                                      "tools", where="tool_choice",
                                      hint="name one of the functions passed in tools")
            prefix = self.parser.forced_prefix(name)
        elif choice == "required":
            raise ValidationError('tool_choice "required" needs a non-empty tools list',
                                  where="tool_choice", hint="pass tools or use auto")
        # job/server defaults, then the request's thinking switch, then its own kwargs
        kwargs = {**self.template_kwargs, **req.template_kwargs(), **_request_template_kwargs(req)}
        key = self.cache.key(messages, tools, kwargs)
        text = self.cache.text(key)
        if text is None:
            try:
                text = self.tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                                    add_generation_prompt=True, **kwargs)
            except Exception as exc:  # jinja errors carry the template's own message
                raise ValidationError(f"the chat template rejected the messages: {exc}",
                                      where="messages",
                                      hint="check roles and message order") from exc
            self.cache.put_text(key, text)
        prompt_ids = self._tokenize(text + prefix, history)
        room = self.engine.max_context - len(prompt_ids)
        if room < 1:
            raise ValidationError(
                f"the prompt is {len(prompt_ids)} tokens; this model's context is "
                f"{self.engine.max_context} tokens", where="messages",
                hint="shorten the conversation")
        max_tokens = req.max_completion_tokens or req.max_tokens
        if max_tokens is not None and max_tokens > room:
            raise ValidationError(
                f"max_tokens={max_tokens} plus the {len(prompt_ids)}-token prompt exceeds this "
                f"model's context of {self.engine.max_context} tokens", where="max_tokens",
                hint=f"ask for at most {room} tokens")
        sampling = SamplingParams(
            temperature=req.temperature, top_p=req.top_p, top_k=max(req.top_k, 0),
            max_tokens=max_tokens or room, min_tokens=req.min_tokens, stop=req.stop_list(),
            ignore_eos=req.ignore_eos, seed=req.seed, n=req.n,
            top_logprobs=(req.top_logprobs or 0) if req.logprobs else 0,
            json_schema=json_schema)
        return Prepared(req, messages, tools, prefix, prompt_ids, sampling,
                        parse_tools=bool(tools) and choice != "none",
                        thinking=self.reasoning and not prefix
                        and (text.rstrip().endswith(THINK_START)))

    def _json_constraint(self, req: ChatCompletionRequest) -> Optional[dict[str, Any]]:
        """The engine's JSON constraint for ``req.response_format``; a 400 naming it where the
        engine cannot constrain decoding (the built-in engine), never a silent plain answer."""
        if req.response_format is None:
            return None
        where = req._format_field
        schema = req.response_format.schema_constraint(where)
        if schema is not None and not self.engine.constrains_json:
            raise ValidationError(
                f"{where} {req.response_format.type}: this gateway's engine "
                f"({type(self.engine).__name__}) cannot constrain decoding to JSON, and an "
                "unconstrained answer would not honour it", where=where,
                hint="serve with --engine vllm (engine: vllm), which constrains it; or leave "
                f"{where} unset, ask for JSON in the prompt and validate the answer")
        return schema

    def _tokenize(self, text: str, history: Sequence[CapturedCall]) -> list[int]:
        """Tokenize a rendered prompt, reusing the exact ids of an earlier call it continues.

        If the text starts with the decoded text of an earlier call's prompt + completion (the
        conversation went on from there), those ids are kept as they were and only the rest is
        tokenized. Fresh tokenization of the same text can split it differently at the seam
        (BPE merges across what used to be a sampling boundary); keeping the ids means the model
        is conditioned on exactly the tokens it produced, and the trainer's rows merge. A
        template that rewrote earlier turns changes the text, so nothing is reused and
        ``build_rows`` reports the break.
        """
        for call in reversed(history[-16:]):
            ids = call.prompt_ids + call.completion_ids
            seen = self.tok.decode(ids, skip_special_tokens=False)
            if len(seen) < len(text) and text.startswith(seen):
                rest = self.tok.encode(text[len(seen):], add_special_tokens=False)
                self.stats["spliced_prompts"] += 1
                return ids + list(rest)
        ids = self.cache.ids(text)
        if ids is None:
            ids = list(self.tok.encode(text, add_special_tokens=False))
            self.cache.put_ids(text, ids)
        return ids

    def engine_request(self, p: Prepared) -> GenerationRequest:
        return GenerationRequest(prompt_ids=p.prompt_ids, sampling=p.sampling,
                                 session=p.session)

    # -- response side ----------------------------------------------------------------------

    def decode(self, ids: Sequence[int]) -> str:
        """Completion text: special tokens dropped, except the tool parser's markers."""
        if not self.marker_ids or not any(t in self.marker_ids for t in ids):
            return self.tok.decode(ids, skip_special_tokens=True)
        parts: list[str] = []
        run: list[int] = []
        for t in ids:
            if t in self.marker_ids:
                parts += [self.tok.decode(run, skip_special_tokens=True), self.marker_ids[t]]
                run = []
            else:
                run.append(t)
        parts.append(self.tok.decode(run, skip_special_tokens=True))
        return "".join(parts)

    def text_of(self, p: Prepared, c: Completion) -> str:
        return _cut_at_stop(self.decode(c.completion_ids), p.sampling.stop)

    def split(self, p: Prepared, text: str, *, partial: bool = False
              ) -> tuple[Optional[str], str]:
        """(reasoning, the rest) of a completion's text; see :func:`split_reasoning`."""
        if not self.reasoning:
            return None, text
        return split_reasoning(text, partial=partial, opened=p.thinking)

    def parse(self, p: Prepared, c: Completion) -> tuple[ParsedOutput, str]:
        """Parse one completion; returns the parsed output and the OpenAI finish reason."""
        reasoning, text = self.split(p, p.prefix + self.text_of(p, c))
        if not p.parse_tools and not self.parser.whole_reply:
            return ParsedOutput(content=text, reasoning=reasoning), c.finish_reason
        out = self.parser.parse(text)
        if not p.parse_tools:  # a harmony reply without tools: its channels, no calls
            return ParsedOutput(content=out.content or "", reasoning=out.reasoning,
                                error=out.error), c.finish_reason
        if reasoning is not None:  # else the parser's own (gpt-oss's analysis channel)
            out.reasoning = reasoning
        if out.error is not None:
            self.stats["malformed_tool_calls"] += 1
        if out.tool_calls:
            self.stats["tool_calls"] += len(out.tool_calls)
            return out, "tool_calls"
        return out, c.finish_reason

    def response(self, p: Prepared, completions: list[Completion]) -> tuple[ChatCompletion, list]:
        choices, parsed = [], []
        for c in completions:
            out, reason = self.parse(p, c)
            parsed.append(out)
            choices.append(Choice(index=c.index, message=_response_message(out),
                                  finish_reason=reason,
                                  logprobs=self.logprobs(c) if p.request.logprobs else None))
        n_out = sum(len(c.completion_ids) for c in completions)
        usage = Usage(prompt_tokens=len(p.prompt_ids), completion_tokens=n_out,
                      total_tokens=len(p.prompt_ids) + n_out)
        return ChatCompletion(model=self.model_name, choices=choices, usage=usage), parsed

    def logprobs(self, c: Completion, start: int = 0, end: Optional[int] = None
                 ) -> ChoiceLogprobs:
        end = len(c.completion_ids) if end is None else end
        items = []
        for i in range(start, end):
            tid, lp = c.completion_ids[i], c.logprobs[i]
            top = c.top_logprobs[i] if c.top_logprobs else []
            items.append(TokenLogprobOut(**self._tok_out(tid, lp), top_logprobs=[
                TopLogprobOut(**self._tok_out(t.token_id, t.logprob)) for t in top]))
        return ChoiceLogprobs(content=items)

    def _tok_out(self, token_id: int, logprob: float) -> dict[str, Any]:
        s = self.tok.decode([token_id], skip_special_tokens=False)
        return {"token": s, "logprob": logprob, "bytes": list(s.encode("utf-8"))}

    def captured(self, p: Prepared, c: Completion, out: ParsedOutput, rollout_id: str,
                 call_index: int, weight_version: int, latency: float) -> CapturedCall:
        return CapturedCall(
            rollout_id=rollout_id, call_index=call_index, choice_index=c.index,
            prompt_ids=p.prompt_ids, completion_ids=c.completion_ids,
            completion_logprobs=c.logprobs, finish_reason=c.finish_reason, latency_s=latency,
            weight_version=weight_version if c.weight_version is None else c.weight_version,
            messages=p.messages, tools=p.tools,
            response_message=_response_message(out).model_dump(exclude_none=True),
            sampling=p.sampling.model_dump(exclude_defaults=True),
            tool_parse_error=out.error)

    # -- streaming --------------------------------------------------------------------------

    async def stream_chunks(self, p: Prepared, on_done: Callable[[list[Completion], list, int,
                                                                  float], None],
                            ) -> AsyncIterator[dict[str, Any]]:
        """Yield ``chat.completion.chunk`` dicts; calls ``on_done`` with the completions."""
        base = {"id": f"chatcmpl-{time.time_ns():x}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self.model_name}
        n = p.sampling.n
        ids: list[list[int]] = [[] for _ in range(n)]
        sent = [0] * n
        thought = [False] * n  # reasoning_content sent
        done: dict[int, Completion] = {}
        for i in range(n):
            yield {**base, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}
        longest_stop = max((len(s) for s in p.sampling.stop), default=0)
        async for d in self.engine.stream(self.engine_request(p)):
            i = d.index
            ids[i].extend(d.token_ids)
            if d.finished is None:
                reasoning, text = self.split(
                    p, p.prefix + _cut_at_stop(self.decode(ids[i]), p.sampling.stop),
                    partial=True)
                if reasoning is not None and not thought[i]:
                    thought[i] = True
                    yield {**base, "choices": [{"index": i, "finish_reason": None,
                                                "delta": {"reasoning_content": reasoning}}]}
                safe = len(text) - max(longest_stop - 1, 0)
                if text.endswith("\ufffd"):  # an incomplete UTF-8 character: wait for the rest
                    safe = min(safe, len(text) - 1)
                if p.parse_tools or self.parser.whole_reply:
                    safe = min(safe, _tool_holdback(self.parser, text))
                piece = text[sent[i]:safe] if safe > sent[i] else ""
                if piece or p.request.logprobs:
                    chunk: dict[str, Any] = {"index": i, "delta": {"content": piece} if piece
                                             else {}, "finish_reason": None}
                    if p.request.logprobs:
                        chunk["logprobs"] = _delta_logprobs(self, d)
                    sent[i] += len(piece)
                    yield {**base, "choices": [chunk]}
                continue
            c = done[i] = d.finished
            out, reason = self.parse(p, c)
            delta: dict[str, Any] = {}
            if out.reasoning is not None and not thought[i]:
                delta["reasoning_content"] = out.reasoning
            rest = (out.content or "")[sent[i]:]
            if rest:
                delta["content"] = rest
            if out.tool_calls:
                delta["tool_calls"] = [
                    {"index": k, "id": tc.id, "type": "function",
                     "function": {"name": tc.name, "arguments": tc.arguments}}
                    for k, tc in enumerate(out.tool_calls)]
            chunk = {"index": i, "delta": delta, "finish_reason": reason}
            if p.request.logprobs:
                chunk["logprobs"] = _delta_logprobs(self, d)
            yield {**base, "choices": [chunk]}
        completions = [done[i] for i in range(n)]
        on_done(completions, [self.parse(p, c)[0] for c in completions],
                self.engine.weight_version, time.perf_counter() - p.started)
        if p.request.stream_options and p.request.stream_options.include_usage:
            n_out = sum(len(c.completion_ids) for c in completions)
            yield {**base, "choices": [], "usage": {
                "prompt_tokens": len(p.prompt_ids), "completion_tokens": n_out,
                "total_tokens": len(p.prompt_ids) + n_out}}


def _delta_logprobs(svc: ChatService, d: Any) -> dict[str, Any]:
    return {"content": [{**svc._tok_out(t, lp), "top_logprobs": []}
                        for t, lp in zip(d.token_ids, d.logprobs, strict=True)]}


def _tool_holdback(parser: ToolParser, text: str) -> int:
    safe = parser.holdback(text)
    # The newline before a tool call belongs to the markup (the parser strips it from content).
    return safe - 1 if safe > 0 and text[safe - 1] == "\n" else safe


def _cut_at_stop(text: str, stops: list[str]) -> str:
    cut = min((text.find(s) for s in stops if s and s in text), default=-1)
    return text[:cut] if cut >= 0 else text


def _response_message(out: ParsedOutput) -> ResponseMessage:
    calls = [{"id": tc.id, "type": "function",
              "function": {"name": tc.name, "arguments": tc.arguments}}
             for tc in out.tool_calls] or None
    return ResponseMessage(content=out.content if (out.content or not calls) else None,
                           tool_calls=calls, reasoning_content=out.reasoning)


THINK_START, THINK_END = "<think>", "</think>"


def split_reasoning(text: str, *, partial: bool = False, opened: bool = False
                    ) -> tuple[Optional[str], str]:
    """``(reasoning, rest)`` of a reasoning model's output, as Qwen3's template reads it back.

    With a ``</think>``, the reasoning is what precedes it (an opening ``<think>`` dropped,
    newlines trimmed) and the rest is what follows (leading newlines trimmed), so that
    ``<think>\\n{reasoning}\\n</think>\\n\\n{rest}`` is the text sampled. Without one,
    the whole text is content (Qwen3 with ``enable_thinking: false``); ``partial`` (a stream
    still running) instead holds back everything after an opening ``<think>``. ``opened``: the
    prompt itself ended with ``<think>`` (so did the model), and a text without ``</think>`` is
    all reasoning (cut off while thinking).

    Example:
        >>> split_reasoning("<think>\\nadd them\\n</think>\\n\\n5")
        ('add them', '5')
        >>> split_reasoning("5"), split_reasoning("<think>\\nadd", partial=True)
        ((None, '5'), (None, ''))
        >>> split_reasoning("\\nadd them", opened=True)
        ('add them', '')
    """
    end = text.find(THINK_END)
    if end >= 0:
        head = text[:end].lstrip()
        if head.startswith(THINK_START):
            head = head[len(THINK_START):]
        return head.strip("\n"), text[end + len(THINK_END):].lstrip("\n")
    head = text.lstrip()
    if partial and (opened or (head and (head.startswith(THINK_START)
                                         or THINK_START.startswith(head)))):
        return None, ""
    if opened:
        return text.strip("\n"), ""
    return None, text


def _template_thinks(tok: Any) -> bool:
    """Whether the chat template knows ``<think>`` blocks (Qwen3, DeepSeek-R1 style)."""
    template = getattr(tok, "chat_template", None)
    if isinstance(template, dict):
        template = " ".join(str(t) for t in template.values())
    return isinstance(template, str) and THINK_END in template


def _request_template_kwargs(req: ChatCompletionRequest) -> dict[str, Any]:
    """A request's own ``chat_template_kwargs`` (vLLM's ``extra_body`` field), checked."""
    kwargs = (req.model_extra or {}).get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ValidationError("chat_template_kwargs must be an object", where="body",
                              hint='e.g. {"enable_thinking": false}')
    from rltune.config.job import RESERVED_TEMPLATE_KWARGS

    taken = sorted(set(kwargs) & RESERVED_TEMPLATE_KWARGS)
    if taken:
        raise ValidationError(f"chat_template_kwargs may not set {', '.join(taken)}",
                              where="chat_template_kwargs",
                              hint="those are set by the request itself")
    return kwargs


def _template_takes_string_arguments(tok: Any) -> bool:
    """Whether the chat template writes string tool-call arguments verbatim (rltune's, Qwen3's,
    gpt-oss's and Kimi-K2's test ``arguments is string``; DeepSeek-V3's and V3.1's join them
    to strings with ``+``). Most others (Llama 3.1, Qwen2.5, Mistral, Qwen3-Coder, GLM-4.5)
    apply ``tojson`` or ``items`` to them and need a mapping."""
    template = getattr(tok, "chat_template", None)
    if isinstance(template, dict):
        template = " ".join(str(t) for t in template.values())
    return not isinstance(template, str) or bool(_STRING_ARGUMENTS.search(template))


_STRING_ARGUMENTS = re.compile(r"arguments(?:'\]|\"\])?\s+is\s+string"
                               r"|\[['\"]arguments['\"]\]\s*\+")


def _message_dict(m: Any, string_arguments: bool = True) -> dict[str, Any]:
    d = m.model_dump(exclude_none=True)
    if d["role"] == "developer":
        d["role"] = "system"
    for call in d.get("tool_calls") or []:
        fn = call["function"]
        args = fn.get("arguments")
        if string_arguments and not isinstance(args, str):
            # the template writes strings verbatim (the exact text sampled), dicts as JSON
            fn["arguments"] = json.dumps(args, ensure_ascii=False)
        elif not string_arguments and isinstance(args, str):
            try:  # as vLLM does: the template serialises the mapping itself
                parsed = json.loads(args)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                fn["arguments"] = parsed
    return d
