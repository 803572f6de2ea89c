"""Who may call a worker: only the pool that started it.

Workers listen on 127.0.0.1, and every sandbox shares the host's network namespace (a rollout
must reach its job's policy gateway there), so any process on the machine, another tenant's
function included, can connect to a worker's port. A pool therefore makes a random secret per
worker (``new_token``) and hands it over on the worker's stdin (``read_token``): not in its
argv or environment, which ``/proc`` shows to other processes of the same uid. The worker then
answers a request only when it carries the secret in the ``X-Rltune-Worker-Token`` header
(``TokenGuard``, compared with ``hmac.compare_digest``), on every route, ``/health`` included;
anything else gets a 401 that tells nothing about the function. The secret sits in the worker's
own memory, where its own code could read it: that is the function's own key, and no other
sandbox can see that process (each has its own PID namespace). A server's loaded instance
(``rltune.functions.front``) is guarded the same way with a secret only the server holds.

Example:
    >>> import asyncio
    >>> async def app(scope, receive, send):
    ...     await send({"type": "http.response.start", "status": 200, "headers": []})
    ...     await send({"type": "http.response.body", "body": b"ok"})
    >>> sent = []
    >>> async def send(message):
    ...     sent.append(message)
    >>> scope = {"type": "http", "headers": [(b"x-rltune-worker-token", b"wrong")]}
    >>> asyncio.run(TokenGuard(app, "right")(scope, None, send))
    >>> sent[0]["status"]
    401
"""

from __future__ import annotations

import hmac
import os
import secrets
import sys
from collections.abc import Callable
from typing import Any

#: The request header carrying a worker's secret.
HEADER = "X-Rltune-Worker-Token"
_HEADER_KEY = HEADER.lower().encode()
_REFUSED = (b'{"message": "this worker answers only the pool that started it (missing or '
            b'wrong X-Rltune-Worker-Token)"}')


def new_token() -> str:
    """A fresh secret for one worker (256 random bits)."""
    return secrets.token_urlsafe(32)


def read_token() -> str:
    """The secret the pool wrote on stdin (one line); stdin is then ``/dev/null``, so the
    function's code reads nothing more there. Raises ``ValueError`` on an empty line."""
    line = sys.stdin.buffer.readline().strip()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if not line:
        raise ValueError("--token-stdin was given but stdin carried no token line")
    return line.decode("ascii")


class TokenGuard:
    """An ASGI wrapper: HTTP requests without the right ``HEADER`` get a 401 and never reach
    ``app``. Plain ASGI (no middleware stack): one header scan per request."""

    def __init__(self, app: Callable[..., Any], token: str):
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            sent = b""
            for key, value in scope["headers"]:
                if key == _HEADER_KEY:
                    sent = value
                    break
            if not hmac.compare_digest(sent, self._token):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(_REFUSED)).encode())]})
                await send({"type": "http.response.body", "body": _REFUSED})
                return
        await self.app(scope, receive, send)


def guarded(app: Any, token: str | None) -> Any:
    """``app`` behind a ``TokenGuard`` when there is a token, else ``app`` as is (a worker
    started by hand with ``rltune functions serve`` answers anyone, like the cloud's)."""
    return TokenGuard(app, token) if token else app
