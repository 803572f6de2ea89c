"""OpenAI chat-completions wire models (the subset rltune serves) and the error body.

Requests keep unknown keys (``extra="allow"``): clients send fields such as ``user``,
``parallel_tool_calls`` or ``stream_options`` that do not change sampling here. Fields that
*would* change sampling but are not supported (penalties, ``logit_bias``) are rejected with a
400 rather than silently ignored.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: Union[str, dict[str, Any]] = "{}"


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: Optional[str] = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Union[str, list[dict[str, Any]], None] = None
    name: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None
    tool_call_id: Optional[str] = None


class FunctionDef(BaseModel):
    """A tool's function schema. Other keys (the Agents SDK's ``strict``, …) are dropped before
    the chat template renders the tools, as serving engines do: they are not part of the
    schema and would only change the prompt."""

    model_config = ConfigDict(extra="ignore")
    name: str
    description: Optional[str] = None
    parameters: Optional[dict[str, Any]] = None


class ToolDef(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["function"] = "function"
    function: FunctionDef


class NamedToolChoice(BaseModel):
    type: Literal["function"] = "function"
    function: dict[str, str]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class Thinking(BaseModel):
    """Volcano Ark / Doubao's thinking switch; rendered as the chat template's
    ``enable_thinking`` (Qwen3's name; templates without it ignore it)."""

    type: Literal["enabled", "disabled", "auto"]


class ResponseFormat(BaseModel):
    """``response_format``: ``text`` (the default), ``json_object`` (any JSON object) or
    ``json_schema`` (``{"json_schema": {"name", "schema", "strict"}}``)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: Optional[dict[str, Any]] = None

    def schema_constraint(self, where: str) -> Optional[dict[str, Any]]:
        """The engine's ``json_schema`` for this format (``{}``: any JSON object; None: text),
        or a 400 naming what is wrong under ``where``."""
        from rltune.sdk.errors import ValidationError

        if self.type == "text":
            return None
        if self.type == "json_object":
            return {}
        schema = (self.json_schema or {}).get("schema")
        if not isinstance(schema, dict) or not schema:
            param = f"{where}.schema" if where == "text.format" else f"{where}.json_schema.schema"
            raise ValidationError(f"{where}: a json_schema format needs its JSON schema as a "
                                  "non-empty object", where=param,
                                  hint='e.g. {"type": "json_schema", "json_schema": {"name": '
                                  '"answer", "schema": {"type": "object", ...}}}')
        return schema


class ChatCompletionRequest(BaseModel):
    """Body of ``POST /v1/chat/completions``. ``top_k``, ``min_tokens`` and ``ignore_eos`` are
    vLLM-style extensions (pass them through ``extra_body`` with the openai client)."""

    model_config = ConfigDict(extra="allow")

    model: Optional[str] = None
    messages: list[ChatMessage] = Field(min_length=1)
    tools: Optional[list[ToolDef]] = None
    tool_choice: Union[Literal["auto", "none", "required"], NamedToolChoice, None] = None
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=-1)
    max_tokens: Optional[int] = Field(None, ge=1)
    max_completion_tokens: Optional[int] = Field(None, ge=1)
    min_tokens: int = Field(0, ge=0)
    n: int = Field(1, ge=1, le=64)
    stop: Union[str, list[str], None] = None
    seed: Optional[int] = None
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Optional[dict[str, float]] = None
    thinking: Optional[Thinking] = None
    response_format: Optional[ResponseFormat] = None
    #: the request field that set ``response_format`` (the Responses API's ``text.format``),
    #: named by its errors
    _format_field: str = PrivateAttr(default="response_format")

    def template_kwargs(self) -> dict[str, Any]:
        """Extra chat-template variables this request sets."""
        if self.thinking is None or self.thinking.type == "auto":
            return {}
        return {"enable_thinking": self.thinking.type == "enabled"}

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: Union[str, list[str], None]) -> Union[str, list[str], None]:
        if isinstance(v, list) and len(v) > 8:
            raise ValueError("at most 8 stop sequences")
        return v

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class TopLogprobOut(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprobOut(TopLogprobOut):
    top_logprobs: list[TopLogprobOut] = Field(default_factory=list)


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprobOut]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ResponseMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: Optional[str] = None
    #: the thinking of a reasoning model (Qwen3's ``<think>`` block), as vLLM returns it
    reasoning_content: Optional[str] = None
    tool_calls: Optional[list[dict[str, Any]]] = None


class Choice(BaseModel):
    index: int
    message: ResponseMessage
    finish_reason: str
    logprobs: Optional[ChoiceLogprobs] = None


class ChatCompletion(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[Choice]
    usage: Usage


def error_body(message: str, *, type_: str = "invalid_request_error",
               param: Optional[str] = None, code: Optional[str] = None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
