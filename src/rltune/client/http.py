"""The REST transport of the client: auth header, retries, and errors back to the error tree.

A server error body ``{"error": {code, message, where, hint}}`` is raised as the matching
``rltune.sdk.errors`` class, so callers catch the same exceptions locally and remotely.
POSTs carry an ``Idempotency-Key`` so a retried create never creates twice.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Optional

import httpx

from rltune.sdk import errors as E
from rltune.sdk.log_level import mask

log = logging.getLogger("rltune.client")

_BY_CODE: dict[str, type[E.RltuneError]] = {}
for _cls in (E.ValidationError, E.ConfigError, E.DatasetError, E.ArchiveError, E.AuthError,
             E.NotFoundError, E.ConflictError, E.UserCodeError, E.FunctionCallError,
             E.OverloadedError, E.DependencyError, E.BuildError):
    _BY_CODE[_cls.code] = _cls
_BY_STATUS = {400: E.ValidationError, 401: E.AuthError, 404: E.NotFoundError,
              409: E.ConflictError, 413: E.ValidationError, 422: E.ValidationError,
              502: E.FunctionCallError, 503: E.OverloadedError}


def raise_for_error(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        err = resp.json()["error"]
    except Exception:
        err = {"message": resp.text[:500] or resp.reason_phrase}
    cls = _BY_CODE.get(err.get("code") or "") or _BY_STATUS.get(resp.status_code, E.RltuneError)
    exc = cls(err.get("message") or f"HTTP {resp.status_code}", where=err.get("where"),
              hint=err.get("hint"))
    exc.http_status = resp.status_code  # type: ignore[misc]
    raise exc


class Transport:
    """Async HTTP to one server with one key. ``retries`` covers connection errors and 5xx."""

    def __init__(self, base_url: str, api_key: Optional[str], timeout: float = 600.0,
                 retries: int = 3):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries

    async def request(self, method: str, path: str, *, params: Optional[dict] = None,
                      json: Any = None, content: Optional[bytes] = None,
                      headers: Optional[dict[str, str]] = None,
                      timeout: Optional[float] = None, raw: bool = False) -> Any:
        hdrs = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        if method == "POST":
            hdrs["Idempotency-Key"] = uuid.uuid4().hex
        hdrs.update(headers or {})
        params = {k: v for k, v in (params or {}).items() if v is not None}
        delay = 0.5
        log.debug("%s %s%s params=%s key=%s", method, self.base_url, path, params,
                  mask(self.api_key))
        for attempt in range(self.retries + 1):
            try:
                async with httpx.AsyncClient(base_url=self.base_url,
                                             timeout=timeout or self.timeout) as client:
                    resp = await client.request(method, path, params=params, json=json,
                                                content=content, headers=hdrs)
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise E.RltuneError(f"cannot reach the rltune server at {self.base_url}: "
                                        f"{exc}", where=self.base_url,
                                        hint="start it with `rltune server start` or set "
                                             "RLTUNE_BASE_URL") from None
            else:
                log.debug("%s %s → %s (%d bytes)", method, path, resp.status_code,
                          len(resp.content))
                if resp.status_code < 500 or attempt >= self.retries:
                    raise_for_error(resp)
                    return resp if raw else resp.json()
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")
