"""One TLS context for every HTTP client a worker's user code builds.

Agents build their ``openai`` (or ``httpx``) client inside ``process``, one per rollout, and
each new client loads the system's CA certificates into a fresh ``ssl.SSLContext``: 20-60 ms of
CPU on the worker's event loop per client, even for the gateway's plain-HTTP address, where
the context is never used. ``share_ssl_contexts()`` (called by the worker before it imports
the user's code) makes ``httpx``'s and ``httpx2``'s default context (``verify=True`` or
``False``, no client certificate) built once per process and per trust setting and shared by
every client after it, as httpx's own advice for many clients is (one context passed as
``verify=``). A client given its own context, a CA path or a certificate still gets exactly
that. ``RLTUNE_WORKER_SHARE_SSL=0`` turns the sharing off.

Example:
    >>> share_ssl_contexts()  # doctest: +SKIP
    >>> import httpx
    >>> a, b = httpx.AsyncClient(), httpx.AsyncClient()
    >>> a._transport._pool._ssl_context is b._transport._pool._ssl_context  # doctest: +SKIP
    True
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from typing import Any

ENV = "RLTUNE_WORKER_SHARE_SSL"
#: The HTTP client libraries whose transports build a context per client (``openai`` uses
#: ``httpx2`` from 3.x on, ``httpx`` before).
LIBRARIES = ("httpx", "httpx2")
_MARK = "_rltune_shared_ssl"


def share_ssl_contexts(libraries: tuple[str, ...] = LIBRARIES) -> list[str]:
    """Wrap each installed library's ``create_ssl_context``; returns the libraries wrapped
    (none when ``RLTUNE_WORKER_SHARE_SSL=0``). Calling it again changes nothing."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return []
    done = []
    for name in libraries:
        try:
            transports = importlib.import_module(f"{name}._transports.default")
        except ImportError:
            continue
        original = getattr(transports, "create_ssl_context", None)
        if original is None:
            continue
        if not getattr(original, _MARK, False):
            transports.create_ssl_context = _shared(original)
        done.append(name)
    return done


def _shared(original: Callable[..., Any]) -> Callable[..., Any]:
    contexts: dict[tuple, Any] = {}
    lock = threading.Lock()

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if cert is not None or not isinstance(verify, bool):  # the client's own: as asked
            return original(verify=verify, cert=cert, trust_env=trust_env)
        # the environment the default context reads, so a changed SSL_CERT_FILE is honoured
        key = (verify, trust_env, os.environ.get("SSL_CERT_FILE"),
               os.environ.get("SSL_CERT_DIR"))
        with lock:
            ctx = contexts.get(key)
            if ctx is None:
                ctx = contexts[key] = original(verify=verify, cert=cert, trust_env=trust_env)
        return ctx

    setattr(create_ssl_context, _MARK, True)
    create_ssl_context.__wrapped__ = original  # type: ignore[attr-defined]
    return create_ssl_context
