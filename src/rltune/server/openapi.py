"""What the OpenAPI document says beyond each route's own ``response_model``: the one error
body every operation may answer with, the media types of the answers that are not JSON, and
the route class that returns a route's plain dict as it was built.

Each route names its success body where it is declared (``response_model=`` a model of
``rltune.server.schemas``, or ``**media(...)`` for a file or a stream);
``tests/server/test_schemathesis.py`` checks that every operation has one and that the running
server answers as the document says."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from starlette.responses import Response

from rltune.server.schemas import ErrorBody

_BINARY = {"type": "string", "format": "binary"}

#: Error answers every ``/v1`` operation may give (all with ``ErrorBody``); ``default`` covers
#: the rarer ones (429 caps, 502/503 from a function or a deployment, 500 on a server bug).
_ERRORS = {400: "bad request (not JSON, a bad archive, user code failed)",
           401: "no valid API key", 404: "no such resource in the workspace",
           409: "conflict with the resource's state or an Idempotency-Key",
           413: "body over the server's limit", 422: "invalid input (names the field)"}
#: ``responses=`` of an operation outside ``/v1`` (``/health``): any error has the one body.
ANY_ERROR: dict[int | str, dict[str, Any]] = {
    "default": {"model": ErrorBody, "description": "another error"}}
#: ``responses=`` of every ``/v1`` router.
V1_ERRORS: dict[int | str, dict[str, Any]] = {
    **{code: {"model": ErrorBody, "description": text} for code, text in _ERRORS.items()},
    **ANY_ERROR}


def media(media_type: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The route keywords of an answer that is not JSON (a file download, an event stream):
    its 200 body documented as ``media_type``, binary unless ``schema`` says otherwise."""
    body = {"description": "Successful Response",
            "content": {media_type: {"schema": schema or _BINARY}}}
    return {"response_class": Response, "responses": {200: body}}


class TypedRoute(APIRoute):
    """A route whose ``response_model`` describes the plain dict it returns: FastAPI checks the
    dict against the model and sends the keys the dict set, no defaults added (the models
    keep keys they do not name, ``schemas.Body``)."""

    def __init__(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        super().__init__(path, endpoint, **kwargs)
