"""A scripted OpenAI-compatible endpoint (the external edge of a test) served on loopback from a
background thread: ``with serve(app) as base_url: ...`` (``http://127.0.0.1:PORT/v1``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from fastapi import Request


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    server.capture_signals = contextlib.nullcontext
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def calc_edge_app(seen: list[dict]) -> Any:
    """An endpoint that answers the calc task's questions right (``### ANSWER: n ###``, from
    ``a op b`` in the last user turn) after 0.2 s, recording each call's ``model``, bearer key
    and how many calls were in flight (``seen``)."""
    import asyncio
    import re

    from fastapi import FastAPI

    app = FastAPI()
    live = [0]

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:  # Request: imported at the top (annotations)
        body = await request.json()
        live[0] += 1
        seen.append({"model": body["model"], "auth": request.headers.get("authorization"),
                     "in_flight": live[0]})
        try:
            await asyncio.sleep(0.2)
        finally:
            live[0] -= 1
        question = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        found = re.search(r"(-?\d+)\s*([-+*])\s*(-?\d+)", question)
        a, op, b = (int(found[1]), found[2], int(found[3])) if found else (0, "+", 0)
        value = a + b if op == "+" else a - b if op == "-" else a * b
        return {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": f"### ANSWER: {value} ###"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}

    return app
