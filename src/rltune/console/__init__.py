"""The web console: a static single-page app served by the job server.

Every asset ships in the package under ``static/`` (plain ES modules, no build step, no CDN),
so the console works offline. The page talks to the job server's REST API with the API key
the user types at login (kept in ``localStorage``); it never reads job files itself.

The job server wires it in with one call::

    from fastapi import FastAPI
    from rltune.console import mount

    app = FastAPI()
    mount(app)          # GET / -> index.html, GET /console/... -> assets

``mount`` adds explicit routes rather than a catch-all mount at ``/``, so it can be called
before or after the API routes are registered without shadowing them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATIC_DIR = Path(__file__).parent / "static"
"""Folder with ``index.html`` and ``assets/`` (JS modules, CSS)."""

ASSETS_PREFIX = "/console"


#: Sent with the page and every asset: scripts only from this server, no framing, no
#: content sniffing, no referrer to other sites.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def mount(app: Any, *, prefix: str = ASSETS_PREFIX) -> None:
    """Serve the console on a FastAPI/Starlette ``app``: ``/`` is the page, assets under prefix.

    The page uses hash routes (``/#/jobs/ft-1/metrics``), so the server needs no fallback
    route for deep links. Assets are sent with ``Cache-Control: no-cache`` so that an
    upgraded rltune never runs a stale script against a newer API.
    """
    from fastapi.responses import FileResponse
    from fastapi.staticfiles import StaticFiles

    index = STATIC_DIR / "index.html"

    async def console_index() -> Any:
        return FileResponse(index, headers={"Cache-Control": "no-cache", **SECURITY_HEADERS})

    app.add_api_route("/", console_index, methods=["GET"], include_in_schema=False)
    app.mount(prefix, _NoCacheStatic(StaticFiles(directory=STATIC_DIR / "assets")), name="console")


class _NoCacheStatic:
    """ASGI wrapper adding ``Cache-Control: no-cache`` (revalidate with ETag every time)."""

    def __init__(self, inner: Any):
        self.inner = inner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_wrapped(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] != b"cache-control"]
                headers.append((b"cache-control", b"no-cache"))
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.inner(scope, receive, send_wrapped)
