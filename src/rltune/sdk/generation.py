"""``from dashscope import Generation`` on rltune: DashScope's text-generation call against a
configured OpenAI-compatible endpoint (``rltune serve``, the policy gateway, a hosted API).

The endpoint is ``DASHSCOPE_BASE_URL`` when it is OpenAI-compatible (ends in ``/v1``), else
``OPENAI_BASE_URL``, else ``http://127.0.0.1:8000/v1``; the key is ``api_key=``,
``DASHSCOPE_API_KEY`` or ``OPENAI_API_KEY``. The answer has DashScope's shape
(``status_code``, ``output.choices[0].message.content`` with ``result_format="message"``, else
``output.text``; ``usage.input_tokens`` / ``output_tokens``), read as attributes or keys.
``trace_client(Generation)`` records a span per call: ``call`` goes through ``create``.

Example::

    from dashscope import Generation
    resp = Generation.call(model="nano", messages=[{"role": "user", "content": "2+2?"}],
                           result_format="message")
    resp.output.choices[0].message.content
"""

from __future__ import annotations

import os
from typing import Any, Optional

import httpx

#: DashScope's parameters that have an OpenAI counterpart of another name.
_RENAMES = {"max_tokens": "max_tokens", "top_p": "top_p", "temperature": "temperature",
            "seed": "seed", "stop": "stop", "tools": "tools", "n": "n",
            "presence_penalty": "presence_penalty"}


class _Obj(dict[str, Any]):
    """A dict whose keys read as attributes (DashScope's response objects do both)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return _Obj({k: _wrap(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def base_url() -> str:
    ds = os.environ.get("DASHSCOPE_BASE_URL", "")
    url = ds if ds.rstrip("/").endswith("/v1") else os.environ.get("OPENAI_BASE_URL", "")
    return (url or "http://127.0.0.1:8000/v1").rstrip("/")


class Generation:
    """DashScope's ``Generation``: ``Generation.call(model, messages|prompt, ...)``."""

    @classmethod
    def call(cls, model: str, messages: Optional[list[dict[str, Any]]] = None,
             prompt: Optional[str] = None, **kwargs: Any) -> Any:
        return cls.create(model=model, messages=messages, prompt=prompt, **kwargs)

    @classmethod
    def create(cls, model: str, messages: Optional[list[dict[str, Any]]] = None,
               prompt: Optional[str] = None, *, api_key: Optional[str] = None,
               result_format: str = "text", extra_headers: Optional[dict[str, str]] = None,
               timeout: float = 300.0, **kwargs: Any) -> Any:
        msgs = list(messages or [])
        if prompt is not None:
            msgs.append({"role": "user", "content": prompt})
        body: dict[str, Any] = {"model": model, "messages": msgs}
        body.update({_RENAMES[k]: v for k, v in kwargs.items() if k in _RENAMES})
        key = api_key or os.environ.get("DASHSCOPE_API_KEY") or os.environ.get(
            "OPENAI_API_KEY") or "EMPTY"
        headers = {"Authorization": f"Bearer {key}", **(extra_headers or {})}
        try:
            resp = httpx.post(base_url() + "/chat/completions", json=body, headers=headers,
                              timeout=timeout)
        except httpx.HTTPError as exc:
            return _wrap({"status_code": 599, "code": "ConnectionError",
                          "message": f"{type(exc).__name__}: {exc}", "output": None,
                          "usage": None, "request_id": ""})
        if resp.status_code != 200:
            return _wrap({"status_code": resp.status_code, "code": "RequestFailed",
                          "message": resp.text[:500], "output": None, "usage": None,
                          "request_id": resp.headers.get("x-request-id", "")})
        data = resp.json()
        choices = [{"finish_reason": c.get("finish_reason"), "message": c.get("message", {})}
                   for c in data.get("choices", [])]
        usage = data.get("usage") or {}
        out: dict[str, Any] = {"choices": choices} if result_format == "message" else {
            "text": (choices[0]["message"].get("content") if choices else ""),
            "finish_reason": choices[0]["finish_reason"] if choices else None}
        return _wrap({
            "status_code": 200, "code": "", "message": "", "request_id": data.get("id", ""),
            "id": data.get("id", ""), "model": data.get("model", model), "output": out,
            "choices": choices,  # the OpenAI view, read by trace_client's span
            "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                      "output_tokens": usage.get("completion_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0),
                      "prompt_tokens": usage.get("prompt_tokens", 0),
                      "completion_tokens": usage.get("completion_tokens", 0)}})
