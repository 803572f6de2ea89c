"""Where a server's jobs run their functions: the server's Ray cluster (``--ray-address``).

The job's driver (trainer, engine, policy gateway, function pool) stays a process on the
server's machine, so states, cancel (kill the process group), logs and resume work as for any
job. Only the function instances go to the cluster, as Ray actors owned by that process: they
are released when it closes its pools and, if it is killed, when Ray sees its owner gone.

``place_functions`` is the one rule, applied when a job is submitted (to refuse it early) and
again each time its process starts (so a resumed job follows the server's current setting):

- server without a cluster: jobs run their functions locally; ``function_backend: ray`` is
  refused;
- server with a cluster: a job without ``function_backend``, or with ``ray`` and no address,
  runs on the server's cluster; ``local`` stays local; another address is refused.

Example:
    >>> from rltune.config import FunctionBackend
    >>> place_functions(None, "10.0.0.5:6379")
    FunctionBackend(type='ray', address='10.0.0.5:6379', gateway_host=None)
    >>> place_functions(FunctionBackend(type="local"), "10.0.0.5:6379").type
    'local'
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any, Optional

from rltune.sdk.errors import ConfigError

log = logging.getLogger("rltune.server.cluster")


def place_functions(backend: Any, server_address: Optional[str]) -> Any:
    """The ``function_backend`` a job of this server runs with (``None``: local processes)."""
    from rltune.config import FunctionBackend

    if backend is None or backend.type == "local":
        if backend is None and server_address:
            return FunctionBackend(type="ray", address=server_address)
        return backend
    if not server_address:
        raise ConfigError(
            "function_backend ray: this job server has no Ray cluster, so jobs run their "
            "functions as local processes",
            where="function_backend",
            hint="remove function_backend, or start the server with `rltune server start "
                 "--ray-address HOST:PORT` (RLTUNE_RAY_ADDRESS)")
    if backend.address is None:
        return backend.model_copy(update={"address": server_address})
    if backend.address != server_address:
        raise ConfigError(
            f"function_backend.address {backend.address}: this job server runs jobs on the "
            f"Ray cluster at {server_address} only",
            where="function_backend.address",
            hint="remove function_backend.address (the server's cluster is used), or run the "
                 "job yourself with `rltune train --ray-address`")
    return backend


def join_cluster(backend: Any) -> Optional[Callable[[], None]]:
    """For a job with functions on Ray: connect this process now (shared with its pools) and
    return the call that leaves; None for local functions."""
    if backend is None or backend.type != "ray":
        return None
    from rltune._ray import connect, disconnect

    connect(backend.address)
    return disconnect


def check_cluster(address: str) -> None:
    """At server start: ray must be importable; warn if the head cannot be reached now."""
    from rltune._ray import import_ray

    import_ray()  # DependencyError naming the ray extra
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" or another form Ray resolves itself
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            pass
    except OSError as exc:
        log.warning("the Ray cluster at %s does not answer now (%s); jobs will fail to start "
                    "their functions until it does", address, exc)
