"""Ark's rollout inference proxy over rltune's policy gateway.

The proxy hands a rollout plugin what it needs to reach the policy: ``url`` (the gateway's
``/v1``), ``jwt_token`` (this rollout attempt's key: every token sampled with it is captured
for training), ``headers`` and ``get_extra_body()`` (the job's sampling parameters plus the
sample's ``thinking``). It also records the conversation, in either of Ark's two modes:

* wrapped: ``wrap_client_inplace(client, proxy=proxy)`` (or the async variant) patches an
  OpenAI-compatible client so each ``chat.completions.create`` goes through the proxy;
* raw: the plugin calls ``update_state_from_messages(messages)`` before and
  ``process_completion(response)`` after each call itself.

``proxy.messages`` / ``usage`` / ``finish_reason`` then describe the trajectory: the turns
after the sample's prompt, in the last call context. Tokens never pass through the proxy; the
gateway captures them exactly.

Example:
    >>> from rltune.ark.types import ChatCompletionSample
    >>> s = ChatCompletionSample(messages=[{"role": "user", "content": "hi"}])
    >>> p = InferenceProxy(s, url="http://127.0.0.1:1/v1", jwt_token="k")
    >>> p.update_state_from_messages([{"role": "user", "content": "hi"}])
    >>> p.process_completion({"choices": [{"message": {"role": "assistant", "content": "yo"},
    ...     "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    >>> [m.content for m in p.messages], p.finish_reason, p.usage.total_tokens
    (['yo'], 'stop', 5)
"""

from __future__ import annotations

import functools
import inspect
import threading
from enum import Enum
from typing import Any, Optional

from rltune.ark.types import ChatCompletionMessage, ChatCompletionSample, Usage
from rltune.sdk.errors import ValidationError


class Mode(str, Enum):
    """``Inference``: a local test against any endpoint; ``Training``: inside an rltune job."""

    Inference = "inference"
    Training = "training"


def as_message_dict(message: Any) -> dict[str, Any]:
    """An OpenAI-style message dict from a dict, an Ark message or an openai message object."""
    if isinstance(message, dict):
        data = dict(message)
    elif hasattr(message, "model_dump"):
        data = message.model_dump(exclude_none=True)
    else:
        raise ValidationError(f"a message must be a dict or a message object, got "
                              f"{type(message).__name__}", where="messages")
    return {k: v for k, v in data.items()
            if v is not None and not (k in ("tool_calls", "reasoning_content") and not v)}


def _same_turn(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("role") == b.get("role") and a.get("content") == b.get("content")


class InferenceProxy:
    """The rollout's view of the policy endpoint (Ark's ``RolloutInferenceProxy``)."""

    def __init__(
        self,
        sample: ChatCompletionSample,
        url: str,
        jwt_token: str,
        mode: Mode = Mode.Inference,
        *,
        headers: Optional[dict[str, str]] = None,
        sampling: Optional[dict[str, Any]] = None,
    ):
        self.sample = sample
        self.url = url
        self.jwt_token = jwt_token
        self.mode = Mode(mode)
        self.headers: dict[str, str] = dict(headers or {})
        self._sampling = {k: v for k, v in (sampling or {}).items()
                          if k in ("temperature", "top_p", "max_tokens")}
        self._prompt = [as_message_dict(m) for m in sample.messages]
        self._context: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.usage = Usage()
        self.finish_reason: Optional[str] = None
        #: Calls whose history did not extend the previous call's (a rewritten history).
        self.history_rewrites = 0
        self.num_completions = 0

    # -- what the plugin passes to its client ------------------------------------------------

    def get_extra_body(self) -> dict[str, Any]:
        """Body fields to send with every call: in training, the job's sampling parameters
        (temperature, top_p, max_tokens per call); always the sample's ``thinking``."""
        body: dict[str, Any] = dict(self._sampling) if self.mode is Mode.Training else {}
        if self.sample.thinking is not None:
            body["thinking"] = dict(self.sample.thinking)
        return body

    # -- raw mode ----------------------------------------------------------------------------

    def update_state_from_messages(self, messages: list[Any]) -> None:
        """Set the call context to ``messages`` (the history about to be sent)."""
        new = [as_message_dict(m) for m in messages]
        with self._lock:
            old = self._context
            if old and not (len(new) >= len(old)
                            and all(_same_turn(a, b) for a, b in zip(old, new, strict=False))):
                self.history_rewrites += 1
            self._context = new

    def process_completion(self, response: Any) -> None:
        """Record a chat-completions response (dict, Ark or openai object) of the context."""
        data = response if isinstance(response, dict) else response.model_dump()
        choices = data.get("choices") or []
        if not choices:
            raise ValidationError("the completion has no choices", where="response")
        choice = choices[0]
        message = as_message_dict(choice.get("message") or {})
        usage = data.get("usage") or {}
        with self._lock:
            if not self._context:
                self._context = list(self._prompt)
            self._context.append(message)
            self.finish_reason = choice.get("finish_reason")
            self.num_completions += 1
            if self.num_completions == 1:
                self.usage.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            self.usage.completion_tokens += int(usage.get("completion_tokens") or 0)
            self.usage.total_tokens = self.usage.prompt_tokens + self.usage.completion_tokens

    # -- the trajectory ----------------------------------------------------------------------

    def message_dicts(self) -> list[dict[str, Any]]:
        """The turns after the sample's prompt in the last call context, as dicts."""
        with self._lock:
            ctx = list(self._context)
        n = len(self._prompt)
        if len(ctx) >= n and all(_same_turn(a, b) for a, b in zip(self._prompt, ctx, strict=False)):
            return ctx[n:]
        return ctx

    @property
    def messages(self) -> list[ChatCompletionMessage]:
        return [ChatCompletionMessage.model_validate(m) for m in self.message_dicts()]

    # -- ready-made clients --------------------------------------------------------------------

    def rollout_client(self) -> Any:
        """An ``openai.OpenAI`` client for this proxy, already wrapped."""
        return wrap_client_inplace(_openai("OpenAI")(base_url=self.url, api_key=self.jwt_token,
                                                     default_headers=self.headers), proxy=self)

    def async_rollout_client(self) -> Any:
        """An ``openai.AsyncOpenAI`` client for this proxy, already wrapped."""
        client = _openai("AsyncOpenAI")(base_url=self.url, api_key=self.jwt_token,
                                        default_headers=self.headers)
        return wrap_async_client_inplace(client, proxy=self)


#: Ark's type name for the proxy a rollout receives.
RolloutInferenceProxy = InferenceProxy


def _openai(name: str) -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError("the proxy's ready-made clients need the openai package "
                          "(pip install 'rltune[ark]')") from exc
    return getattr(openai, name)


def _completions(client: Any) -> Any:
    try:
        return client.chat.completions
    except AttributeError:
        raise ValidationError(
            f"{type(client).__name__} has no chat.completions; rltune wraps OpenAI-compatible "
            "clients (openai.OpenAI / AsyncOpenAI, volcenginesdkarkruntime.Ark / AsyncArk)",
            where="wrap_client_inplace",
            hint="build an OpenAI client with base_url=proxy.url, api_key=proxy.jwt_token",
        ) from None


def _prepare(proxy: InferenceProxy, kwargs: dict[str, Any]) -> dict[str, Any]:
    if kwargs.get("stream"):
        raise ValidationError("stream=True is not supported by a wrapped rollout client",
                              where="chat.completions.create", hint="call with stream=False")
    messages = kwargs.get("messages")
    if messages is None:
        raise ValidationError("chat.completions.create needs messages=",
                              where="chat.completions.create")
    proxy.update_state_from_messages(list(messages))
    out = dict(kwargs)
    out["extra_body"] = {**(kwargs.get("extra_body") or {}), **proxy.get_extra_body()}
    out["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **proxy.headers}
    return out


def wrap_client_inplace(client: Any, proxy: InferenceProxy) -> Any:
    """Route a sync client's ``chat.completions.create`` through ``proxy``; returns it."""
    completions = _completions(client)
    original = completions.create

    @functools.wraps(original)
    def create(*args: Any, **kwargs: Any) -> Any:
        response = original(*args, **_prepare(proxy, kwargs))
        if inspect.isawaitable(response):
            close = getattr(response, "close", None)
            if close:
                close()
            raise ValidationError("wrap_client_inplace got an async client",
                                  where="wrap_client_inplace",
                                  hint="use wrap_async_client_inplace for AsyncOpenAI/AsyncArk")
        proxy.process_completion(response)
        return response

    completions.create = create
    return client


def wrap_async_client_inplace(client: Any, proxy: InferenceProxy) -> Any:
    """Route an async client's ``chat.completions.create`` through ``proxy``; returns it."""
    completions = _completions(client)
    original = completions.create

    @functools.wraps(original)
    async def create(*args: Any, **kwargs: Any) -> Any:
        response = original(*args, **_prepare(proxy, kwargs))
        if inspect.isawaitable(response):
            response = await response
        proxy.process_completion(response)
        return response

    completions.create = create
    return client


__all__ = [
    "InferenceProxy",
    "Mode",
    "RolloutInferenceProxy",
    "wrap_async_client_inplace",
    "wrap_client_inplace",
]
