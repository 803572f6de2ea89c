"""One error body for every failure: ``{"error": {code, message, where, hint}, "status"}``.

``rltune.sdk.errors`` classes carry their HTTP status; FastAPI's own errors (bad JSON, missing
query parameters, unknown routes) are mapped to the same shape.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rltune.sdk.errors import RltuneError

log = logging.getLogger("rltune.server")


class TooLargeError(RltuneError):
    """An upload is above the server's size limit."""

    http_status = 413
    code = "too_large"


def error_response(status: int, code: str, message: str, where: str | None = None,
                   hint: str | None = None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "where": where, "hint": hint},
            "status": status}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RltuneError)
    async def _rltune(request: Request, exc: RltuneError) -> JSONResponse:
        hide = _server_paths(request)
        return error_response(exc.http_status, exc.code, hide(exc.message), hide(exc.where),
                              hide(exc.hint))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request"}
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        return error_response(422, "invalid_input", f"{first['msg']}{more}",
                              _field(tuple(first.get("loc", ()))),
                              "see the route's schema in /openapi.json")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "bad_request")
        return error_response(exc.status_code, code, str(exc.detail), request.url.path)

    @app.exception_handler(RecursionError)
    async def _deep(request: Request, exc: RecursionError) -> JSONResponse:
        return error_response(400, "too_deep", "the input is nested too deeply",
                              "request body", "flatten the structure (at most 64 levels)")

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error",
                              _server_paths(request)(f"{type(exc).__name__}: {exc}"),
                              request.url.path, "this is a bug in rltune; please report it")


def _server_paths(request: Request) -> Callable[[str | None], str | None]:
    ctx = getattr(request.app.state, "ctx", None)
    return path_hider(getattr(getattr(ctx, "settings", None), "home", None))


def path_hider(home: Path | str | None) -> Callable[[str | None], str | None]:
    """A function that writes the server's state folder (``$RLTUNE_HOME``) and working
    directory as ``$RLTUNE_HOME`` and ``.``: a tenant learns no server path from an error.

    >>> path_hider("/srv/rlt")("no file /srv/rlt/server/files/x.jsonl")
    'no file $RLTUNE_HOME/server/files/x.jsonl'
    """
    pairs = []
    if home is not None:
        pairs += [(str(Path(home).resolve()), "$RLTUNE_HOME"), (str(home), "$RLTUNE_HOME")]
    with contextlib.suppress(OSError):
        pairs.append((os.getcwd(), "."))
    pairs = sorted({p for p in pairs if len(p[0]) > 1}, key=lambda p: -len(p[0]))

    def hide(text: str | None) -> str | None:
        if not text:
            return text
        for path, name in pairs:
            text = text.replace(path, name)
        return text

    return hide
