"""The HTTP app of one worker: ``POST /api/v1`` runs the processor, ``GET /health`` answers.

Status codes follow the cloud function server: 400 body is not JSON, 422 body does
not fit the input model, 503 more than ``concurrency`` in flight plus ``queue_size`` waiting,
500 ``process`` raised, 499 the client went away (the call is cancelled). rltune adds 504 when a
call runs past the per-call timeout. A ``traceparent`` header becomes the OTel parent context.

Example:
    >>> from rltune.sdk import AbstractRewardProcessor, RewardOutput, Reward
    >>> class One(AbstractRewardProcessor):
    ...     def process(self, inp):
    ...         return RewardOutput(reward=Reward(reward_score=1.0))
    >>> app = build_app(One(), "reward", concurrency=4)
    >>> sorted(r.path for r in app.routes if r.path.startswith(("/api", "/health")))
    ['/api/v1', '/health']
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from rltune._fastapi import fastapi_app
from rltune.functions.output import call_tag, tag_of
from rltune.sdk.data import INPUT_MODELS, FunctionType
from rltune.sdk.processors import AbstractProcessor, call_process
from rltune.sdk.tracing import entry_span

STATUS_CLIENT_CLOSED = 499


def _json(status: int, payload: Any) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


def to_jsonable(result: Any) -> Any:
    """What the cloud server returns: a model's dump (secrets revealed), a dict, or ``result``."""
    if isinstance(result, BaseModel):
        dump = getattr(result, "to_wire", None)
        return dump() if dump else result.model_dump(mode="json")
    if isinstance(result, dict):
        return result
    return {"result": result}


class WorkerState:
    """Counters the app keeps; read by ``/health`` and by the pool's tests."""

    def __init__(self, concurrency: int, queue_size: int):
        self.concurrency = concurrency
        self.queue_size = queue_size
        self.in_flight = 0
        self.waiting = 0
        self.served = 0
        self.started = time.time()


def build_app(
    processor: AbstractProcessor,
    func_type: str | FunctionType,
    *,
    concurrency: int = 32,
    queue_size: int = 100,
    timeout: Optional[float] = None,
    executor: Optional[ThreadPoolExecutor] = None,
) -> FastAPI:
    """Build the FastAPI app serving ``processor`` (already set up) for ``func_type``."""
    ftype = FunctionType(func_type)
    input_model = INPUT_MODELS[ftype]
    state = WorkerState(concurrency, queue_size)
    slots = asyncio.Semaphore(concurrency)
    pool = executor or ThreadPoolExecutor(
        max_workers=max(concurrency, 1), thread_name_prefix="rltune-process"
    )
    app = fastapi_app(title="rltune function worker", docs_url=None, redoc_url=None)
    app.state.worker = state

    @app.get("/health")
    async def health() -> Response:
        return _json(200, {
            "status": "healthy",
            "func_type": ftype.value,
            "processor": type(processor).__name__,
            "parser": input_model.__name__,
            "pid": os.getpid(),
            "in_flight": state.in_flight,
            "waiting": state.waiting,
            "served": state.served,
        })

    @app.post("/api/v1")
    async def invoke(request: Request) -> Response:
        raw = await request.body()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return _json(400, {"detail": f"Invalid JSON body: {exc}"})
        if not isinstance(body, dict):
            return _json(422, {"detail": "Request parsing error: the body must be a JSON object"})
        sent = body.setdefault("func_type", ftype.value)
        if sent != ftype.value:
            return _json(422, {"detail": f"Request parsing error: func_type {sent!r} sent to a "
                                         f"{ftype.value!r} worker; send it to the right function"})
        try:
            data = input_model.model_validate(body)
        except PydanticValidationError as exc:
            return _json(422, {"detail": f"Request parsing error: {exc}"})

        if state.in_flight >= concurrency and state.waiting >= queue_size:
            return _json(503, {"message": f"worker busy: {state.in_flight} in flight and "
                                          f"{state.waiting} queued (concurrency {concurrency}, "
                                          f"queue {queue_size}); retry later or add workers"})
        state.waiting += 1
        try:
            await slots.acquire()
        finally:
            state.waiting -= 1
        state.in_flight += 1
        try:
            return await _run(request, data)
        finally:
            state.in_flight -= 1
            state.served += 1
            slots.release()

    async def _run(request: Request, data: Any) -> Response:
        headers = dict(request.headers)
        if "traceparent" not in headers and getattr(data, "traceparent", None):
            headers["traceparent"] = data.traceparent  # sent in the body only
        # The invoke_agentic_rl span joins the caller's trace; the task copies the current
        # context, so the span is the parent of the user code's spans, also in the thread,
        # and the call's output tag (rltune.functions.output) follows it there too.
        with entry_span(data, headers):
            with call_tag(tag_of(data)):
                task = asyncio.ensure_future(call_process(processor, data, executor=pool))
            watch = asyncio.ensure_future(_wait_disconnect(request))
            try:
                done, _ = await asyncio.wait(
                    {task, watch}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                watch.cancel()
        if task not in done:
            task.cancel()
            if watch in done:
                return _json(STATUS_CLIENT_CLOSED,
                             {"message": "Client disconnected, request cancelled."})
            return _json(504, {"message": f"process() ran past the call timeout of {timeout} s; "
                                          "raise the component's timeout or make the call faster",
                               "error_type": "TimeoutError"})
        try:
            result = task.result()
        except Exception as exc:
            return _json(500, {"message": str(exc) or type(exc).__name__,
                               "error_type": type(exc).__name__,
                               "traceback": traceback.format_exc(limit=20)})
        try:
            payload = to_jsonable(result)
            bad = first_non_finite(payload)
            if bad is not None:
                # JSON has no NaN/inf (orjson would quietly write null): say so instead.
                return _json(500, {"message": f"process() returned a non-finite number at "
                                              f"{bad[0]} ({bad[1]}); scores and metrics must be "
                                              "finite numbers (return status FAILED to give up)",
                                   "error_type": "InvalidOutput", "invalid_output": True})
            return _json(200, payload)
        except (TypeError, orjson.JSONEncodeError) as exc:
            return _json(500, {"message": f"process() returned {type(result).__name__} that is "
                                          f"not JSON-serialisable: {exc}",
                               "error_type": type(exc).__name__})

    return app


def first_non_finite(data: Any, path: str = "") -> Optional[tuple[str, float]]:
    """(path, value) of the first NaN or infinite float in a JSON-like value, else None.

    >>> first_non_finite({"reward": {"reward_score": float("nan")}})
    ('reward.reward_score', nan)
    """
    if isinstance(data, float):
        return None if math.isfinite(data) else (path or "<root>", data)
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, (dict, list, float)):
                found = first_non_finite(value, f"{path}.{key}" if path else str(key))
                if found:
                    return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            if isinstance(value, (dict, list, float)):
                found = first_non_finite(value, f"{path}[{i}]")
                if found:
                    return found
    return None


async def _wait_disconnect(request: Request) -> None:
    # After the body is read, the server's receive() returns only when the client disconnects
    # (or the response is complete, which cannot happen before we answer).
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
