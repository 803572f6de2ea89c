"""``POST /v1/responses`` with ``stream: true``: the Responses API's server-sent events, made
from the chat service's own stream (:meth:`ChatService.stream_chunks`, which holds tool-call
markup back and captures the call when it ends, as for a streamed chat completion).

The event sequence, each event ``event: <type>`` + ``data: <json>`` with a growing
``sequence_number``: ``response.created``, ``response.in_progress``; for text, a ``message``
item (``response.output_item.added``, ``response.content_part.added``, one
``response.output_text.delta`` per piece, ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``); for each tool call, a
``function_call`` item (``response.output_item.added``,
``response.function_call_arguments.delta``, ``response.function_call_arguments.done``,
``response.output_item.done``); then ``response.completed`` (``response.incomplete`` when the
output ran into ``max_output_tokens``) with the whole response. An error once the stream has
begun is an ``error`` event, and the stream ends there.

Example:
    >>> sse("response.created", {"type": "response.created"})
    'event: response.created\\ndata: {"type": "response.created"}\\n\\n'
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Optional

from rltune.gateway.responses import (
    ResponsesRequest,
    function_call_item,
    message_item,
    response_object,
)
from rltune.sdk.errors import RltuneError


def sse(event: str, data: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


class _Events:
    """Numbers the events of one stream and keeps the output items sent so far."""

    def __init__(self, req: ResponsesRequest, model: str):
        self.req, self.model = req, model
        self.id, self.created = f"resp_{uuid.uuid4().hex}", int(time.time())
        self.seq = 0
        self.output: list[dict[str, Any]] = []

    def event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse(kind, data)

    def response(self, finish_reason: Optional[str] = None,
                 usage: Optional[dict[str, int]] = None) -> dict[str, Any]:
        return response_object(self.req, self.model, self.id, list(self.output),
                               finish_reason=finish_reason, usage=usage,
                               created_at=self.created)


async def response_events(req: ResponsesRequest, chunks: AsyncIterator[dict[str, Any]],
                          model: str) -> AsyncIterator[str]:
    """The Responses API's events for one call, from its chat stream's ``chunks``."""
    ev = _Events(req, model)
    yield ev.event("response.created", response=ev.response())
    yield ev.event("response.in_progress", response=ev.response())
    msg: Optional[dict[str, Any]] = None  # the message item being streamed
    text, finish, usage = "", None, None
    calls: list[dict[str, Any]] = []
    try:
        async for chunk in chunks:
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                piece = delta.get("content")
                if piece:
                    if msg is None:
                        msg = message_item(f"msg_{uuid.uuid4().hex}", None, "in_progress")
                        yield ev.event("response.output_item.added",
                                       output_index=len(ev.output), item=msg)
                        ev.output.append(msg)
                        yield ev.event("response.content_part.added", item_id=msg["id"],
                                       output_index=len(ev.output) - 1, content_index=0,
                                       part={"type": "output_text", "text": "",
                                             "annotations": []})
                    text += piece
                    yield ev.event("response.output_text.delta", item_id=msg["id"],
                                   output_index=ev.output.index(msg), content_index=0,
                                   delta=piece, logprobs=[])
                calls += delta.get("tool_calls") or []
                finish = choice.get("finish_reason") or finish
    except RltuneError as exc:  # headers are sent: report in-band
        yield ev.event("error", code=exc.code, message=str(exc), param=exc.where)
        return
    if msg is not None:
        index = ev.output.index(msg)
        part = {"type": "output_text", "text": text, "annotations": []}
        yield ev.event("response.output_text.done", item_id=msg["id"], output_index=index,
                       content_index=0, text=text, logprobs=[])
        yield ev.event("response.content_part.done", item_id=msg["id"], output_index=index,
                       content_index=0, part=part)
        ev.output[index] = msg = message_item(msg["id"], text)
        yield ev.event("response.output_item.done", output_index=index, item=msg)
    for call in calls:
        item_id, index = f"fc_{uuid.uuid4().hex}", len(ev.output)
        yield ev.event("response.output_item.added", output_index=index,
                       item=function_call_item(item_id, call, "in_progress", arguments=""))
        ev.output.append(function_call_item(item_id, call))
        arguments = call["function"]["arguments"]
        yield ev.event("response.function_call_arguments.delta", item_id=item_id,
                       output_index=index, delta=arguments)
        yield ev.event("response.function_call_arguments.done", item_id=item_id,
                       output_index=index, name=call["function"]["name"], arguments=arguments)
        yield ev.event("response.output_item.done", output_index=index, item=ev.output[index])
    final = ev.response(finish or "stop", usage)
    yield ev.event(f"response.{final['status']}", response=final)
