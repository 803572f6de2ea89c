"""The REST transport of the client: auth header, retries, and errors back to the error tree.

A server error body ``{"error": {code, message, where, hint}}`` is raised as the matching
``rltune.sdk.errors`` class, so callers catch the same exceptions locally and remotely.
POSTs carry an ``Idempotency-Key`` so a retried create never creates twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any, BinaryIO, Optional

import httpx

from rltune.sdk import errors as E
from rltune.sdk.log_level import mask

log = logging.getLogger("rltune.client")
#: Bytes read and written at a time by downloads (model exports).
CHUNK_BYTES = 1 << 20

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
    """HTTP to one server with one key, over ONE pooled ``httpx.Client`` (kept-alive
    connections are reused by every call, whichever event loop awaits it; the blocking call runs
    in a thread). ``retries`` covers connection errors and 5xx."""

    def __init__(self, base_url: str, api_key: Optional[str], timeout: float = 600.0,
                 retries: int = 3):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self._client: Optional[httpx.Client] = None
        self._lock = threading.Lock()

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None or self._client.is_closed:
                self._client = httpx.Client(base_url=self.base_url, timeout=self.timeout)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _headers(self, method: str, headers: Optional[dict[str, str]]) -> dict[str, str]:
        hdrs = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        if method == "POST":
            hdrs["Idempotency-Key"] = uuid.uuid4().hex
        hdrs.update(headers or {})
        return hdrs

    def _unreachable(self, exc: Exception) -> E.ServerUnreachableError:
        return E.ServerUnreachableError(
            f"cannot reach the rltune server at {self.base_url}: {exc}", where=self.base_url,
            hint="start it with `rltune server start` or set RLTUNE_BASE_URL")

    async def request(self, method: str, path: str, *, params: Optional[dict] = None,
                      json: Any = None, content: Optional[bytes] = None,
                      headers: Optional[dict[str, str]] = None,
                      timeout: Optional[float] = None, raw: bool = False) -> Any:
        hdrs = self._headers(method, headers)
        params = {k: v for k, v in (params or {}).items() if v is not None}
        delay = 0.5
        log.debug("%s %s%s params=%s key=%s", method, self.base_url, path, params,
                  mask(self.api_key))
        for attempt in range(self.retries + 1):
            try:
                resp = await asyncio.to_thread(
                    self.client.request, method, path, params=params, json=json,
                    content=content, headers=hdrs, timeout=timeout or self.timeout)
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise self._unreachable(exc) from None
            else:
                log.debug("%s %s → %s (%d bytes)", method, path, resp.status_code,
                          len(resp.content))
                if resp.status_code < 500 or attempt >= self.retries:
                    raise_for_error(resp)
                    return resp if raw else resp.json()
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def download(self, path: str, dest: BinaryIO, *, params: Optional[dict] = None,
                 progress: Optional[Callable[[int, Optional[int]], None]] = None,
                 chunk_size: int = CHUNK_BYTES) -> int:
        """GET ``path`` into the open file ``dest`` chunk by chunk (never the whole body in
        memory); ``progress(bytes_so_far, total_or_None)`` after each chunk. Returns the bytes
        written."""
        params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            with self.client.stream("GET", path, params=params,
                                    headers=self._headers("GET", None)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise_for_error(resp)
                total = int(resp.headers["content-length"]) \
                    if "content-length" in resp.headers else None
                done = 0
                for chunk in resp.iter_bytes(chunk_size):
                    dest.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        return done
