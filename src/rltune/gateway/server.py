"""The :class:`Gateway`: one engine served over HTTP, with per-rollout keys and capture.

The trainer runs it inside its own event loop::

    gw = await Gateway.start(engine, host="127.0.0.1", port=0)   # uvicorn in this loop
    gw.register("key-abc", rollout_id="r-1")      # hand base_url + key to the rollout
    ...                                           # the rollout calls /v1/chat/completions
    calls = gw.pop_calls("r-1"); gw.unregister("key-abc")
    rows = build_rows(calls)
    await gw.stop()

Serving mode (no capture) passes ``static_keys`` (or ``open_access=True`` for a local
playground) and registers nothing.

Tool calls are parsed by the parser of the model's family (``config.model_type``, see
``toolcalls.parser_for_model_type``); ``tool_parser="llama3_json"`` (or a ``parser`` instance)
chooses one explicitly. A family rltune does not know is a ``ConfigError``, not a guess.
``chat_template_kwargs`` are the template arguments of every call (``chat.py``).

Each registered key names a *session* (its rollout, unless ``register`` is given one, as the
rollout runner gives every rollout of a prompt's group their group's id): an engine group
sends every call of a session to one replica, where its prompt prefix's KV is
(``engine/affinity.py``), and forgets the session when its last key is unregistered.
Serving keys have no session (each call goes to the least loaded replica).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Optional

from rltune.engine.base import Engine
from rltune.gateway.admission import Admission
from rltune.gateway.capture import CapturedCall, CaptureStore
from rltune.gateway.chat import ChatService
from rltune.gateway.toolcalls import ToolParser, parser_for_model_type
from rltune.sdk.errors import AuthError


class Gateway:
    """State of one policy gateway: engine, keys, capture store, and (once started) a server."""

    def __init__(self, engine: Engine, *, static_keys: tuple[str, ...] = (),
                 open_access: bool = False, parser: Optional[ToolParser] = None,
                 tool_parser: Optional[str] = None, model_name: Optional[str] = None,
                 chat_template_kwargs: Optional[dict[str, Any]] = None,
                 max_body_bytes: int = 4 * 1024 * 1024, strict_model: bool = False,
                 max_concurrent_requests: Optional[int] = None):
        self.engine = engine
        #: Backpressure (``admission.py``): past this many chat calls in flight, 429 with
        #: Retry-After; None = no limit.
        self.admission = Admission(max_concurrent_requests)
        #: Serving (``rltune serve``): a request naming another ``model`` answers 404, as a
        #: deployment does. Training gateways take any name (agents send their own).
        self.strict_model = strict_model
        self.model_name = model_name or engine.model_name
        if parser is None:
            # An HF model's config (built-in engine) or the engine's own (vLLM: no HF model)
            config = getattr(engine, "model_config", None) or getattr(
                getattr(engine, "model", None), "config", None)
            parser = parser_for_model_type(getattr(config, "model_type", None),
                                           getattr(config, "architectures", None) or (),
                                           override=tool_parser)
        self.chat = ChatService(engine, parser, model_name=self.model_name,
                                chat_template_kwargs=chat_template_kwargs)
        self.store = CaptureStore()
        self.static_keys = set(static_keys)
        self.open_access = open_access
        self.max_body_bytes = max_body_bytes
        self.started_at = time.time()
        self._keys: dict[str, str] = {}
        self._traces: dict[str, str] = {}  # key -> traceparent of its rollout span
        self._sessions: dict[str, str] = {}  # key -> its session (engine replica affinity)
        self._session_keys: dict[str, int] = {}  # session -> how many live keys name it
        self._lock = threading.Lock()
        self._server: Any = None
        self._task: Optional[asyncio.Task] = None
        self.base_url = ""
        from rltune.gateway.app import create_app

        self.app = create_app(self)

    # -- keys and capture -------------------------------------------------------------------

    def register(self, key: str, rollout_id: str, *, traceparent: Optional[str] = None,
                 session: Optional[str] = None) -> None:
        """Accept ``key`` and capture its calls under ``rollout_id``; their ``generate`` spans
        join ``traceparent`` (the rollout span) when a call carries no trace header. Its calls
        share an engine replica with every other key of ``session`` (default: the rollout)."""
        if not key:
            raise ValueError("empty api key")
        with self._lock:
            self._forget_session(key)  # a key registered again moves to its new session
            self._keys[key] = rollout_id
            if traceparent:
                self._traces[key] = traceparent
            name = session or rollout_id
            self._sessions[key] = name
            self._session_keys[name] = self._session_keys.get(name, 0) + 1

    def unregister(self, key: str) -> None:
        """Reject ``key`` from now on (401). Captured calls stay until popped."""
        with self._lock:
            self._keys.pop(key, None)
            self._traces.pop(key, None)
            self._forget_session(key)

    def _forget_session(self, key: str) -> None:
        """Drop ``key`` from its session; the engine forgets a session none names (lock held)."""
        name = self._sessions.pop(key, None)
        if name is None:
            return
        left = self._session_keys[name] - 1
        if left:
            self._session_keys[name] = left
            return
        del self._session_keys[name]
        end = getattr(self.engine, "end_session", None)  # an EngineGroup's
        if end is not None:
            end(name)

    def session_of(self, header: Optional[str]) -> Optional[str]:
        """The session of the key in an ``Authorization`` header (None: a serving key)."""
        key = header[7:].strip() if header and header.lower().startswith("bearer ") else None
        with self._lock:
            return self._sessions.get(key) if key else None

    def trace_parent(self, header: Optional[str]) -> Optional[str]:
        """The rollout span registered with the key in an ``Authorization`` header."""
        key = header[7:].strip() if header and header.lower().startswith("bearer ") else None
        with self._lock:
            return self._traces.get(key) if key else None

    def calls(self, rollout_id: str) -> list[CapturedCall]:
        """Captured calls of a rollout so far, in arrival order (not cleared)."""
        return self.store.calls(rollout_id)

    def pop_calls(self, rollout_id: str) -> list[CapturedCall]:
        """Captured calls of a rollout, forgetting them (call once the rollout finished)."""
        return self.store.pop(rollout_id)

    def authenticate(self, header: Optional[str]) -> Optional[str]:
        """Map an ``Authorization`` header to a rollout id (None = serving key, not captured)."""
        key = header[7:].strip() if header and header.lower().startswith("bearer ") else None
        with self._lock:
            rollout_id = self._keys.get(key) if key else None
        if rollout_id is not None:
            return rollout_id
        if (key and key in self.static_keys) or self.open_access:
            return None
        if not key:
            raise AuthError("missing api key: send 'Authorization: Bearer <key>'",
                            hint="use the api_key from model_resource")
        raise AuthError("unknown or expired api key",
                        hint="use the api_key handed to this rollout; keys expire with it")

    def stats(self) -> dict[str, Any]:
        out = {**self.chat.stats, "live_keys": len(self._keys),
               "prompt_cache": dict(self.chat.cache.stats),
               "admission": {**self.admission.stats, "in_flight": self.admission.in_flight,
                             "limit": self.admission.limit}}
        # the built-in engine's KV by token prefix (engine/prefixcache.py)
        cache = getattr(self.engine, "prefix_cache_stats", lambda: None)()
        if cache is not None:
            out["engine_prefix_cache"] = {**cache, **self.engine.token_counters()}
        replicas = getattr(self.engine, "replica_stats", None)  # an EngineGroup's replicas
        if replicas is not None:
            out["engine_replicas"] = replicas()
        return out

    # -- server -----------------------------------------------------------------------------

    @classmethod
    async def start(cls, engine: Engine, *, host: str = "127.0.0.1", port: int = 0,
                    **kwargs: Any) -> Gateway:
        """Build a gateway and serve it with uvicorn as a task of the running loop."""
        gw = cls(engine, **kwargs)
        await gw.serve(host=host, port=port)
        return gw

    async def serve(self, *, host: str = "127.0.0.1", port: int = 0) -> str:
        import uvicorn

        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():  # e.g. the port is taken
                self._task.result()
                raise RuntimeError("the gateway server stopped during start-up")
            await asyncio.sleep(0.01)
        sock = self._server.servers[0].sockets[0].getsockname()
        self.base_url = f"http://{host}:{sock[1]}/v1"
        return self.base_url

    async def wait(self) -> None:
        """Block until the server stops (Ctrl-C / SIGTERM in serving mode, or ``stop()``)."""
        if self._task is not None:
            await self._task

    async def stop(self, *, close_engine: bool = False) -> None:
        if self._server is not None:
            self._server.should_exit = True
            await self._task
            self._server = None
        if close_engine:
            await self.engine.close()
