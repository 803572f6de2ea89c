"""``POST /v1/responses`` (the OpenAI Responses API, the OpenAI Agents SDK's default) over the
same chat service: a request's input items become chat messages, the model's output becomes
``message`` / ``function_call`` items, and the call is captured token-exactly like a chat
completion, so an agent's calls merge into one training row.

Input items → chat messages: ``instructions`` → a system message; ``{role, content}`` messages
(text parts joined); ``function_call`` items join the assistant message just before them as
``tool_calls`` (``call_id`` is the tool call id); ``function_call_output`` → a ``tool``
message. Function tools ``{type: function, name, description, parameters, strict}`` become chat
tools (``strict`` has no meaning for a local model's parser and is dropped). What would change
the result but is not supported (stored responses, ``previous_response_id``, reasoning, JSON
built-in tools) is refused with a 400 naming the field. ``stream: true`` answers the Responses
API's server-sent events (:mod:`rltune.gateway.responses_stream`). ``text.format`` ``json_object`` /
``json_schema`` become the chat request's ``response_format`` (honoured, or refused, as there).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from rltune.gateway.protocol import ChatCompletionRequest
from rltune.sdk.errors import ValidationError

#: Accepted keys that do not change what is sampled here.
_NEUTRAL = {"store", "include", "metadata", "user", "parallel_tool_calls", "service_tier",
            "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options",
            "safety_identifier", "stream_options"}


class ResponsesRequest(BaseModel):
    """Body of ``POST /v1/responses`` (the subset served)."""

    model_config = ConfigDict(extra="allow")

    model: Optional[str] = None
    input: Union[str, list[dict[str, Any]]]
    instructions: Optional[str] = None
    tools: Optional[list[dict[str, Any]]] = None
    tool_choice: Union[Literal["auto", "none", "required"], dict[str, Any], None] = None
    temperature: Optional[float] = Field(None, ge=0.0, le=2.0)
    top_p: Optional[float] = Field(None, gt=0.0, le=1.0)
    max_output_tokens: Optional[int] = Field(None, ge=1)
    stream: bool = False
    truncation: Optional[Literal["disabled", "auto"]] = None
    previous_response_id: Optional[str] = None
    conversation: Any = None
    reasoning: Optional[dict[str, Any]] = None
    text: Optional[dict[str, Any]] = None
    background: Optional[bool] = None


def _refuse(field: str, why: str, hint: str) -> ValidationError:
    return ValidationError(f"{field}: {why}", where=field, hint=hint)


def _check(req: ResponsesRequest) -> None:
    if req.input in ("", []):
        raise _refuse("input", "is empty: there is nothing to answer",
                      "send the user's message as a string, or a list of input items")
    if req.previous_response_id or req.conversation:
        raise _refuse("previous_response_id", "responses are not stored, so a conversation "
                      "cannot continue from one", "send the whole conversation as input")
    if req.reasoning and any(v is not None for v in req.reasoning.values()):
        raise _refuse("reasoning", "reasoning settings are not supported", "leave it unset")
    if req.background:
        raise _refuse("background", "background responses are not supported", "leave it unset")
    for key in sorted(req.model_extra or {}):
        if key not in _NEUTRAL:
            raise _refuse(key, "is not supported by this gateway",
                          f"leave it unset; supported extras: {sorted(_NEUTRAL)}")


def _text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text"):
            raise _refuse(where, f"content part of type {kind!r} is not supported",
                          "send text parts only")
        parts.append(part.get("text") or "")
    return "".join(parts)


def _messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    items = [{"role": "user", "content": req.input}] if isinstance(req.input, str) else req.input
    out: list[dict[str, Any]] = []
    if req.instructions:
        out.append({"role": "system", "content": req.instructions})
    calls: set[Any] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise _refuse(where, "an input item is an object", "send {role, content} "
                          "messages, function_call and function_call_output items")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise _refuse(f"{where}.role", f"{role!r} is not a message role",
                              "use user, system, developer or assistant")
            out.append({"role": role, "content": _text(item.get("content"), where)})
        elif kind == "function_call":
            if not isinstance(item.get("name"), str) or not item["name"]:
                raise _refuse(f"{where}.name", "a function_call names its function",
                              "set name to the function called")
            call = {"id": item.get("call_id") or item.get("id"), "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments", "{}")}}
            calls.add(call["id"])
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and last.get("_open", True):
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise _refuse(f"{where}.call_id", f"no function_call with call_id "
                              f"{item.get('call_id')!r} comes before this output",
                              "send the function_call item (from the previous response's "
                              "output) before its function_call_output")
            if out and out[-1]["role"] == "assistant":
                out[-1]["_open"] = False
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": output if isinstance(output, str) else _text(output, where)})
        else:
            raise _refuse(f"{where}.type", f"input items of type {kind!r} are not supported",
                          "send messages, function_call and function_call_output items")
    if not any(m["role"] != "system" for m in out):
        raise _refuse("input", "there is no message to answer",
                      "send a string or at least one message item")
    for m in out:
        m.pop("_open", None)
        if m["role"] == "assistant" and m.get("tool_calls") and m["content"] == "":
            m["content"] = None
    return out


def _tools(req: ResponsesRequest) -> Optional[list[dict[str, Any]]]:
    if not req.tools:
        return None
    tools = []
    for i, tool in enumerate(req.tools):
        if tool.get("type") != "function":
            raise _refuse(f"tools[{i}].type", f"{tool.get('type')!r} tools are not served",
                          "use function tools")
        fn = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k)}
        tools.append({"type": "function", "function": fn})
    return tools


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict):
        if choice.get("type") != "function" or not choice.get("name"):
            raise _refuse("tool_choice", f"{choice} is not supported",
                          'use "auto", "none", "required" or {"type": "function", "name": ...}')
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def _response_format(req: ResponsesRequest) -> Optional[dict[str, Any]]:
    """``text.format`` as a chat ``response_format`` (the Responses API flattens
    ``json_schema``'s ``name`` / ``schema`` / ``strict`` into the format itself)."""
    fmt = (req.text or {}).get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        return {"type": kind, "json_schema": {k: fmt[k] for k in ("name", "schema", "strict")
                                              if k in fmt}}
    raise _refuse("text.format", f"{kind!r} output is not a format this gateway knows",
                  'use {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
                  '"name": ..., "schema": {...}}')


def to_chat_request(req: ResponsesRequest) -> ChatCompletionRequest:
    """The chat-completions request that samples what ``req`` asks for."""
    _check(req)
    body: dict[str, Any] = {"model": req.model, "messages": _messages(req),
                            "tools": _tools(req), "tool_choice": _tool_choice(req.tool_choice),
                            "max_tokens": req.max_output_tokens}
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    body["response_format"] = _response_format(req)
    if req.stream:  # the chat stream's last chunk then carries the usage
        body.update(stream=True, stream_options={"include_usage": True})
    chat = ChatCompletionRequest.model_validate({k: v for k, v in body.items() if v is not None})
    chat._format_field = "text.format"
    return chat


def response_body(req: ResponsesRequest, chat: Any, model: str) -> dict[str, Any]:
    """A Responses API ``response`` object from the chat completion of ``to_chat_request``."""
    choice = chat.choices[0]
    message = choice.message
    output: list[dict[str, Any]] = []
    if message.content:
        output.append(message_item(f"msg_{uuid.uuid4().hex}", message.content))
    for call in message.tool_calls or []:
        output.append(function_call_item(f"fc_{uuid.uuid4().hex}", call))
    return response_object(req, model, f"resp_{uuid.uuid4().hex}", output,
                           finish_reason=choice.finish_reason,
                           usage=chat.usage.model_dump())


def message_item(item_id: str, text: Optional[str], status: str = "completed"
                 ) -> dict[str, Any]:
    """An assistant ``message`` output item (no content part yet when ``text`` is None)."""
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": content}


def function_call_item(item_id: str, call: dict[str, Any], status: str = "completed",
                       arguments: Optional[str] = None) -> dict[str, Any]:
    """A ``function_call`` output item from a chat ``tool_calls`` entry."""
    return {"type": "function_call", "id": item_id, "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"] if arguments is None else arguments,
            "status": status}


def response_object(req: ResponsesRequest, model: str, response_id: str,
                    output: list[dict[str, Any]], *, finish_reason: Optional[str],
                    usage: Optional[dict[str, int]], created_at: Optional[int] = None
                    ) -> dict[str, Any]:
    """The ``response`` object: ``in_progress`` while ``finish_reason`` is None, then
    ``completed`` (or ``incomplete`` when the output ran into ``max_output_tokens``)."""
    incomplete = finish_reason == "length"
    status = ("in_progress" if finish_reason is None else
              "incomplete" if incomplete else "completed")
    return {
        "id": response_id, "object": "response",
        "created_at": int(time.time()) if created_at is None else created_at,
        "model": model, "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None, "instructions": req.instructions, "output": output,
        "tools": req.tools or [], "tool_choice": req.tool_choice or "auto",
        "parallel_tool_calls": True, "temperature": req.temperature, "top_p": req.top_p,
        "max_output_tokens": req.max_output_tokens,
        "text": {"format": (req.text or {}).get("format") or {"type": "text"}},
        "truncation": req.truncation or "disabled", "metadata": {},
        "usage": None if usage is None else {
            "input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}},
    }
