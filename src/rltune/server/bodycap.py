"""A cap on JSON request bodies: ``413`` before anything parses them.

Every ``/v1`` request with a body, except the two upload routes (``POST /v1/files`` and
``POST /v1/functions``, capped by ``max_upload_bytes`` as they stream), may carry at most
``max_json_bytes`` (default 1 MiB, ``--max-json-bytes``). A declared ``Content-Length`` above it
is refused without reading; a chunked body is read until it passes the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rltune.server.errors import error_response

UPLOAD_ROUTES = frozenset({"/v1/files", "/v1/functions"})


class JsonBodyCap:
    """ASGI middleware; ``limit`` returns the cap (read per request: settings live in the
    app's state)."""

    def __init__(self, app: Any, limit: Callable[[], int]):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if (scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS")
                or not scope["path"].startswith("/v1/")
                or (scope["method"] == "POST" and scope["path"].rstrip("/") in UPLOAD_ROUTES)):
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, limit, int(declared))
            return
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limit:
                await self._refuse(scope, receive, send, limit, None)
                return
            if not message.get("more_body"):
                break

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope: dict, receive: Callable, send: Callable, limit: int,
                      declared: int | None) -> None:
        size = f"is {declared} bytes" if declared is not None else "is larger than that"
        response = error_response(
            413, "too_large", f"the request body {size}; JSON bodies are limited to {limit} "
            "bytes", "request body", "send a smaller config (upload datasets as files: "
            "POST /v1/files); the operator sets the cap with --max-json-bytes")
        await response(scope, receive, send)
