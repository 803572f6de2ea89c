"""One deployment's serving process: ``python -m rltune.lifecycle.serveproc <deployment dir>``.

The job server writes ``<dir>/spec.json`` (``{"engine", "host", "threads", "models": [{"name",
"path", "tool_parser"}]}``), ``<dir>/keys.json`` (sha256 of the deployment's API keys, re-read
when it changes) and ``<dir>/internal.key`` (the server's own key, for the console's
playground), then starts this module. It loads one engine per model, puts rltune's gateway in
front of each, and serves them all on one port: ``POST /v1/chat/completions`` goes to the
gateway of the request's ``model`` (the only one when ``model`` is left out), as does
``POST /v1/responses``; ``GET /v1/models`` lists them. Once listening it writes
``<dir>/endpoint.json``.

Engines are built by ``rltune.engine.select.build_engine``, as for jobs and ``rltune serve``:
``builtin`` (``threads`` torch threads) or ``vllm`` (its CPU backend takes ``OMP_NUM_THREADS``).
Both run on CUDA in bf16 where torch sees a GPU, else on the CPU in fp32
(``rltune.engine.placement``; the installed vLLM build decides which it can run on).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional


def load_engine(kind: str, path: str, name: str, threads: int) -> Any:
    """The engine of one served model, built by the one engine selector."""
    from rltune.engine.placement import auto_placement
    from rltune.engine.select import build_engine

    device, dtype = auto_placement("auto", "auto")  # a GPU in bf16 where torch sees one
    return build_engine(kind, path, model_name=name, device=device, dtype=dtype,
                        threads=threads, colocated=False)


class KeyRing:
    """Accepted bearer keys: sha256 hashes from ``keys.json`` (re-read on change) + internal."""

    def __init__(self, root: Path):
        self.path = root / "keys.json"
        self.internal = (root / "internal.key").read_text().strip()
        self._mtime: Optional[float] = None
        self._hashes: set[str] = set()

    def ok(self, header: str) -> bool:
        scheme, _, secret = (header or "").partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            return False
        if secret == self.internal:
            return True
        try:
            mtime = self.path.stat().st_mtime_ns
            if mtime != self._mtime:
                self._hashes = set(json.loads(self.path.read_text()).get("sha256", []))
                self._mtime = mtime
        except (OSError, ValueError):
            pass
        return hashlib.sha256(secret.encode()).hexdigest() in self._hashes


def _json(status: int, body: dict) -> tuple[int, bytes]:
    return status, json.dumps(body).encode()


def _error(status: int, message: str, code: str, param: Optional[str] = None):
    kind = {401: "authentication_error", 404: "not_found_error"}.get(
        status, "invalid_request_error")
    return _json(status, {"error": {"message": message, "type": kind, "param": param,
                                    "code": code}})


class Router:
    """An ASGI app that authenticates and hands each request to the gateway of its model."""

    def __init__(self, gateways: dict[str, Any], keys: KeyRing):
        self.gateways = gateways
        self.keys = keys

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        path, method = scope["path"], scope["method"]
        if path == "/health":
            return await self._send(send, *_json(200, {"status": "ok",
                                                       "models": list(self.gateways)}))
        if not self.keys.ok(headers.get("authorization", "")):
            return await self._send(send, *_error(401, "missing or unknown api key: send "
                                                  "'Authorization: Bearer <deployment key>'",
                                                  "invalid_api_key"))
        if path == "/v1/models" and method == "GET":
            data = [{"id": n, "object": "model", "created": int(g.started_at),
                     "owned_by": "rltune"} for n, g in self.gateways.items()]
            return await self._send(send, *_json(200, {"object": "list", "data": data}))
        if path not in ("/v1/chat/completions", "/v1/responses") or method != "POST":
            return await self._send(send, *_error(404, f"no route {method} {path}",
                                                  "not_found"))
        limit = min(g.max_body_bytes for g in self.gateways.values())
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if len(body) > limit:  # read no further than a gateway would accept
                return await self._send(send, *_error(
                    413, f"request body is larger than {limit} bytes", "request_too_large"))
            if not msg.get("more_body"):
                break
        too_deep = False
        try:
            model = json.loads(body).get("model")
        except (ValueError, AttributeError):
            model = None  # the gateway reports the bad body
        except RecursionError:  # any gateway answers it with 400 too_deep, model unread
            model, too_deep = None, True
        if (model is None and len(self.gateways) == 1) or too_deep:
            model = next(iter(self.gateways))
        gw = self.gateways.get(model)
        if gw is None:
            return await self._send(send, *_error(
                404, f"model {model!r} is not served here; served: {', '.join(self.gateways)}",
                "model_not_found", "model"))
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await gw.app(scope, replay, send)

    @staticmethod
    async def _send(send: Any, status: int, payload: bytes) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


async def serve(root: Path) -> None:
    import uvicorn

    from rltune.gateway.server import Gateway
    from rltune.gateway.toolcalls import parser_name_for_model_dir

    spec = json.loads((root / "spec.json").read_text())
    gateways: dict[str, Any] = {}
    for m in spec["models"]:
        parser = parser_name_for_model_dir(m["path"], m.get("tool_parser"))
        kind = spec.get("engine", "builtin")
        engine = load_engine(kind, m["path"], m["name"], int(spec.get("threads", 1)))
        gateways[m["name"]] = Gateway(engine, open_access=True, tool_parser=parser)
        print(f"loaded {m['name']} from {m['path']} (engine {kind}, tool-call parser "
              f"{parser})", flush=True)
    config = uvicorn.Config(Router(gateways, KeyRing(root)), host=spec.get("host", "127.0.0.1"),
                            port=int(spec.get("port", 0)), log_level="warning",
                            lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the server stopped during start-up")
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    host = spec.get("host", "127.0.0.1")
    info = {"pid": os.getpid(), "port": port, "base_url": f"http://{host}:{port}/v1"}
    tmp = root / "endpoint.json.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, root / "endpoint.json")
    print(f"serving {', '.join(gateways)} at {info['base_url']}", flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    try:
        await task
    finally:
        for gw in gateways.values():
            await gw.engine.close()


def main(argv: Optional[list[str]] = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m rltune.lifecycle.serveproc <deployment dir>", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        asyncio.run(serve(Path(args[0]).resolve()))
    except Exception as exc:
        print(f"deployment failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
