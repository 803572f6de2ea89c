"""A lean HTTP/1.1 keep-alive client for pool → worker and built-in rollout → gateway calls.

Why not httpx: its connection pool scans every connection on each request (quadratic in the
number of connections); at 64 concurrent calls it spent most of the pool's CPU there and capped
the pool near 200 calls/s on 2 cores (measured, benchmarks/RESULTS.md). The workers are our own
servers on 127.0.0.1 answering with Content-Length bodies, so a small client suffices: one idle
stack of connections per worker, POST with a body, read status, headers and body. The trainer's
built-in rollout reaches its own policy gateway the same way (httpx cost the event loop about
1.4 ms per chat call there, this client a tenth of that; benchmarks/RESULTS.md, 2026-12-03).

Example:
    >>> client = WorkerHTTPClient("127.0.0.1", 9)   # nothing listens on port 9
    >>> import asyncio
    >>> try:
    ...     asyncio.run(client.post("/api/v1", b"{}", timeout=1))
    ... except WorkerConnectionError as exc:
    ...     print("connection failed")
    connection failed
"""

from __future__ import annotations

import asyncio
from typing import Optional

from rltune.sdk.errors import WorkerConnectionError, WorkerTimeout


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class WorkerHTTPClient:
    """Keep-alive POSTs to one worker. Not a general HTTP client (no TLS, no redirects)."""

    def __init__(self, host: str, port: int, max_idle: int = 256,
                 headers: Optional[dict[str, str]] = None):
        self.host = host
        self.port = port
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._host_header = f"{host}:{port}".encode()
        #: Sent with every request (a worker's ``X-Rltune-Worker-Token``).
        self._fixed = b"".join(f"{k}: {v}\r\n".encode() for k, v in (headers or {}).items())

    async def _connect(self) -> _Conn:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=2**24)
        except OSError as exc:
            where = f"{self.host}:{self.port}"
            raise WorkerConnectionError(f"cannot connect to {where}: {exc}") from exc
        return _Conn(reader, writer)

    async def post(self, path: str, body: bytes, headers: Optional[dict[str, str]] = None,
                   timeout: Optional[float] = None) -> tuple[int, bytes]:
        """POST ``body`` as JSON; return (status, body). Raises the two errors above."""
        return await self.request("POST", path, body, headers, timeout)

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: Optional[dict[str, str]] = None,
                      timeout: Optional[float] = None) -> tuple[int, bytes]:
        """Send one request; return (status, body). Raises the two errors above."""
        status, _, data = await self.exchange(method, path, body, headers, timeout)
        return status, data

    async def exchange(self, method: str, path: str, body: bytes = b"",
                       headers: Optional[dict[str, str]] = None,
                       timeout: Optional[float] = None) -> tuple[int, dict[str, str], bytes]:
        """Send one request; return (status, response headers with lower-case names, body)."""
        head = [method.encode(), b" ", path.encode(), b" HTTP/1.1\r\nHost: ", self._host_header,
                b"\r\nContent-Type: application/json\r\nContent-Length: ",
                str(len(body)).encode(), b"\r\n", self._fixed]
        for key, value in (headers or {}).items():
            head += [key.encode(), b": ", value.encode(), b"\r\n"]
        head.append(b"\r\n")
        request = b"".join(head) + body
        if timeout is None:
            return await self._exchange(request)
        try:
            return await asyncio.wait_for(self._exchange(request), timeout)
        except asyncio.TimeoutError as exc:
            where = f"{self.host}:{self.port}"
            raise WorkerTimeout(f"no answer from {where} within {timeout} s") from exc

    async def _exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        reused = bool(self._idle)
        conn = self._idle.pop() if reused else await self._connect()
        try:
            status, headers, body, keep = await self._send_and_read(conn, request)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            conn.close()
            if reused and isinstance(exc, (asyncio.IncompleteReadError, ConnectionResetError)):
                # An idle keep-alive connection the server had closed: retry once on a fresh one.
                conn = await self._connect()
                try:
                    status, headers, body, keep = await self._send_and_read(conn, request)
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc2:
                    conn.close()
                    raise WorkerConnectionError(f"{type(exc2).__name__}: {exc2}") from exc2
            else:
                raise WorkerConnectionError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            conn.close()  # cancelled mid-call: the connection's state is unknown
            raise
        if keep and len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            conn.close()
        return status, headers, body

    @staticmethod
    async def _send_and_read(conn: _Conn, request: bytes
                             ) -> tuple[int, dict[str, str], bytes, bool]:
        conn.writer.write(request)
        reader = conn.reader
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = None
        keep = True
        chunked = False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name:
                headers[name] = value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                keep = False
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                parts.append(await reader.readexactly(size + 2))
            return status, headers, b"".join(p[:-2] for p in parts), keep
        if length is None:
            return status, headers, await reader.read(), False
        return status, headers, await reader.readexactly(length), keep

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
