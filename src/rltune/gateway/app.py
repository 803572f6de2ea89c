"""The FastAPI app of the policy gateway: routes, auth, OpenAI-shaped errors.

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses`` (:mod:`rltune.gateway.responses`;
streamed: :mod:`rltune.gateway.responses_stream`), ``GET /v1/models``, ``GET /health``; any
other path or method is a 404 / 405 in OpenAI's error shape. Every ``/v1`` call
needs ``Authorization: Bearer <key>`` where the key is a live per-rollout key (its calls are
captured for that rollout) or a static serving key (not captured), unless the gateway was made
with ``open_access=True``. ``/health`` answers anyone, but with the model, its weight version
and the counters only to a valid key (the job's model path and progress are the tenant's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError as PydanticValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from rltune._fastapi import fastapi_app
from rltune.config.yaml_io import MAX_DEPTH, nesting_depth
from rltune.gateway.protocol import ChatCompletionRequest, error_body
from rltune.gateway.responses import ResponsesRequest, response_body, to_chat_request
from rltune.gateway.responses_stream import response_events
from rltune.observability.spans import generate_span
from rltune.sdk.errors import AuthError, RltuneError

if TYPE_CHECKING:
    from rltune.gateway.server import Gateway

log = logging.getLogger("rltune.gateway")
_TOO_DEEP = object()
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
          405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
          503: "server_error"}
#: The routes served, named by a 404 for any other path.
ROUTES = ("POST /v1/chat/completions", "POST /v1/responses", "GET /v1/models", "GET /health")


def _error(status: int, message: str, *, param: Optional[str] = None,
           code: Optional[str] = None) -> JSONResponse:
    return JSONResponse(error_body(message, type_=_TYPES.get(status, "server_error"),
                                   param=param, code=code), status_code=status)


def create_app(gw: Gateway) -> FastAPI:
    """Build the app around a :class:`~rltune.gateway.server.Gateway` (keys, engine, capture)."""
    app = fastapi_app(title="rltune policy gateway", docs_url=None, redoc_url=None)

    @app.exception_handler(RltuneError)
    async def _rltune_error(_: Request, exc: RltuneError) -> JSONResponse:
        status = 400 if exc.http_status == 422 else exc.http_status
        return _error(status, str(exc), param=exc.where, code=exc.code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _describe(exc.errors())
        return _error(400, message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and methods: OpenAI's error shape, not FastAPI's ``{"detail"}``."""
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 404:
            return _error(404, f"{where} is not a route of this gateway; it serves: "
                          f"{', '.join(ROUTES)}", code="unknown_url")
        if exc.status_code == 405:
            allowed = exc.headers.get("Allow", "") if exc.headers else ""
            resp = _error(405, f"{where}: method not allowed; this route takes {allowed}",
                          code="method_not_allowed")
            resp.headers["Allow"] = allowed
            return resp
        return _error(exc.status_code, f"{where}: {exc.detail}")

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:  # JSON, never plain text
        log.exception("gateway error")
        return _error(500, f"internal error: {type(exc).__name__}", code="internal_error")

    app.add_middleware(_BodyLimit, gw=gw)

    @app.get("/health")
    async def health(request: Request) -> dict[str, Any]:
        try:
            gw.authenticate(request.headers.get("authorization"))
        except AuthError:  # any process on the machine can reach a job's gateway: liveness only
            return {"status": "ok"}
        return {"status": "ok", "model": gw.model_name, "weight_version":
                gw.engine.weight_version, "stats": gw.stats()}

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        gw.authenticate(request.headers.get("authorization"))
        return {"object": "list", "data": [{"id": gw.model_name, "object": "model",
                                            "created": int(gw.started_at), "owned_by": "rltune"}]}

    async def read(request: Request, model: type) -> Any:
        """The request body validated as ``model``, or the OpenAI-shaped error response."""
        raw = await request.body()
        if len(raw) > gw.max_body_bytes:
            return _error(413, f"request body is {len(raw)} bytes; the limit is "
                          f"{gw.max_body_bytes} bytes", code="request_too_large")
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(400, f"request body is not valid JSON: {exc}",
                          code="invalid_json")
        except RecursionError:
            body = _TOO_DEEP
        if body is _TOO_DEEP or nesting_depth(body) > MAX_DEPTH:
            return _error(400, f"request body is nested more than {MAX_DEPTH} levels deep",
                          code="too_deep")
        try:
            req = model.model_validate(body)
        except PydanticValidationError as exc:
            message, param = _describe(exc.errors())
            return _error(400, message, param=param)
        if gw.strict_model and req.model and req.model != gw.model_name:
            return _error(404, f"model {req.model!r} is not served here; served: "
                          f"{gw.model_name}", param="model", code="model_not_found")
        return req

    async def begin(request: Request, model: type) -> Any:
        """Authenticate, read and prepare one chat call: a :class:`_Call`, or the error."""
        rollout_id = gw.authenticate(request.headers.get("authorization"))
        req = await read(request, model)
        if isinstance(req, JSONResponse):
            return req
        chat_req = to_chat_request(req) if isinstance(req, ResponsesRequest) else req
        p = gw.chat.prepare(chat_req, gw.store.calls(rollout_id) if rollout_id else ())
        p.session = gw.session_of(request.headers.get("authorization"))
        gw.chat.stats["requests"] += 1
        call_index = gw.store.next_index(rollout_id) if rollout_id else 0
        return _Call(gw, rollout_id, req, p, call_index)

    async def generate(request: Request, call: _Call) -> Any:
        """The engine's result, or None when the client left first (its job was aborted)."""
        with generate_span(request.headers, call.rollout_id,
                           gw.trace_parent(request.headers.get("authorization"))) as span:
            result = await _unless_disconnected(
                request, gw.engine.generate_one(gw.chat.engine_request(call.prepared)))
            if result is not None:
                _span_usage(span, result, call.index)
        if result is None:
            gw.chat.stats["disconnected"] = gw.chat.stats.get("disconnected", 0) + 1
        return result

    def too_busy() -> JSONResponse:
        """429: the gateway's ``max_concurrent_requests`` calls are in the engine already."""
        resp = _error(429, f"the policy gateway is serving its limit of "
                      f"{gw.admission.limit} concurrent requests; retry after "
                      f"{gw.admission.retry_after_s()} s", code="rate_limited")
        resp.headers.update(gw.admission.headers())
        return resp

    @app.post("/v1/responses")
    async def responses(request: Request) -> Any:
        if not gw.admission.enter():
            return too_busy()
        t0, streaming = time.perf_counter(), False
        try:
            call = await begin(request, ResponsesRequest)
            if isinstance(call, JSONResponse):
                return call
            if call.request.stream:  # the stream frees its slot when it ends
                streaming = True
                events = response_events(
                    call.request, gw.chat.stream_chunks(call.prepared, call.capture),
                    gw.chat.model_name)
                return StreamingResponse(_released(events, gw.admission, t0),
                                         media_type="text/event-stream")
            return await _responses(request, call)
        finally:
            if not streaming:
                gw.admission.leave(time.perf_counter() - t0)

    async def _responses(request: Request, call: _Call) -> Any:
        """The Responses API over the chat service; captured like chat completions."""
        result = await generate(request, call)
        if result is None:
            return Response(status_code=499)
        chat, parsed = gw.chat.response(call.prepared, result.completions)
        call.capture(result.completions, parsed, result.weight_version, result.latency_s)
        return JSONResponse(response_body(call.request, chat, gw.chat.model_name))

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        if not gw.admission.enter():
            return too_busy()
        t0, streaming = time.perf_counter(), False
        try:
            call = await begin(request, ChatCompletionRequest)
            if isinstance(call, JSONResponse):
                return call
            if call.request.stream:  # the stream frees its slot when it ends
                streaming = True
                chunks = _sse(gw.chat.stream_chunks(call.prepared, call.capture))
                return StreamingResponse(_released(chunks, gw.admission, t0),
                                         media_type="text/event-stream")
            return await _chat(request, call)
        finally:
            if not streaming:
                gw.admission.leave(time.perf_counter() - t0)

    async def _chat(request: Request, call: _Call) -> Any:
        result = await generate(request, call)
        if result is None:  # the client is gone; its rows were freed
            return Response(status_code=499)
        resp, parsed = gw.chat.response(call.prepared, result.completions)
        call.capture(result.completions, parsed, result.weight_version, result.latency_s)
        return JSONResponse(resp.model_dump(exclude_none=True))

    @app.exception_handler(AuthError)
    async def _auth(_: Request, exc: AuthError) -> JSONResponse:
        return _error(401, str(exc), code="invalid_api_key")

    return app


class _BodyLimit:
    """413 for a declared body over ``gw.max_body_bytes``. Plain ASGI (not ``@app.middleware``),
    so the route still sees the client's disconnect (``Request.is_disconnected``)."""

    def __init__(self, app: Any, gw: Gateway):
        self.app, self.gw = app, gw

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            size = dict(scope["headers"]).get(b"content-length", b"").decode()
            if size.isdigit() and int(size) > self.gw.max_body_bytes:
                resp = _error(413, f"request body is {size} bytes; the limit is "
                              f"{self.gw.max_body_bytes} bytes (fix: send fewer or shorter "
                              "messages)", code="request_too_large")
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _Call:
    """One prepared chat call: who made it (the rollout, if any), its request, its index."""

    def __init__(self, gw: Gateway, rollout_id: Optional[str], request: Any, prepared: Any,
                 index: int):
        self.gw, self.rollout_id, self.request = gw, rollout_id, request
        self.prepared, self.index = prepared, index

    def capture(self, completions: list, parsed: list, version: int, latency: float) -> None:
        """Record the completions for the rollout (a serving key's calls are not captured)."""
        if not self.rollout_id:
            return
        for c, out in zip(completions, parsed, strict=True):
            self.gw.store.add(self.gw.chat.captured(self.prepared, c, out, self.rollout_id,
                                                    self.index, version, latency))


async def _unless_disconnected(request: Request, work: Any, poll_s: float = 0.25) -> Any:
    """``await work``, or cancel it (the engine frees its rows) and return None when the
    client disconnects first. (A stream is cancelled by Starlette itself on disconnect.)"""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
            if await request.is_disconnected():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return None
    finally:
        if not task.done():  # this handler itself was cancelled
            task.cancel()

def _span_usage(span: Any, result: Any, call_index: int) -> None:
    """Tokens, latency and weight version of one generation, on its ``generate`` span."""
    if not span.is_recording():
        return
    span.set_attribute("rltune.call_index", call_index)
    span.set_attribute("rltune.weight_version", int(result.weight_version))
    span.set_attribute("rltune.latency_s", float(result.latency_s))
    span.set_attribute("gen_ai.usage.input_tokens", len(result.prompt_ids))
    span.set_attribute("gen_ai.usage.output_tokens",
                       sum(len(c.completion_ids) for c in result.completions))
    span.set_attribute("gen_ai.response.finish_reasons",
                       ",".join(str(c.finish_reason) for c in result.completions))


async def _released(chunks: Any, admission: Any, t0: float) -> Any:
    """``chunks``, then the stream's admission slot is freed (however the stream ends)."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        admission.leave(time.perf_counter() - t0)


async def _sse(chunks: Any) -> Any:
    try:
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n"
    except RltuneError as exc:  # headers are sent: report in-band, as OpenAI does
        yield f"data: {json.dumps(error_body(str(exc), code=exc.code))}\n\n"
    yield "data: [DONE]\n\n"


def _describe(errors: list[dict[str, Any]]) -> tuple[str, Optional[str]]:
    """First pydantic error as (message with field path, param)."""
    if not errors:
        return "invalid request", None
    e = errors[0]
    loc = [str(x) for x in e.get("loc", ()) if x != "body"]
    param = ".".join(loc) or None
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{param or 'body'}: {e.get('msg', 'invalid')}{more}", param
