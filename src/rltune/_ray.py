"""The one way rltune uses a Ray cluster: connect, disconnect, ship rltune to the nodes.

A process holds one Ray connection, shared by everything in it that uses the cluster
(function backends, engine replicas, the job process of a server with ``--ray-address``):
each user calls :func:`connect` and, when done, :func:`disconnect`; the last one leaves the
cluster. Actors get rltune itself as a ``py_modules`` package (:func:`ship_package`), uploaded
once per content, so a node needs only Python and rltune's dependencies.

``ray`` is imported only inside these functions; without it :func:`import_ray` raises a
``DependencyError`` that names the extra to install.

Example:
    >>> ray = connect("10.0.0.5:6379")                     # doctest: +SKIP
    >>> env = {"env_vars": {}, **ship_package()}           # doctest: +SKIP
    >>> disconnect()                                       # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.errors import ConfigError, DependencyError

log = logging.getLogger("rltune.ray")
_connections = 0  # users of this process's Ray connection


def import_ray() -> Any:
    """The ``ray`` module, or a ``DependencyError`` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise DependencyError(
            "function_backend ray needs the ray package, which is not installed",
            hint="pip install 'rltune[ray]' (or set function_backend: local)",
        ) from exc
    return ray


def connect(address: Optional[str], *, what: str = "function_backend ray",
            where: str = "function_backend.address") -> Any:
    """Join the cluster at ``address`` (else ``RAY_ADDRESS``) unless this process already has;
    count one more user of the connection. ``what`` and ``where`` name the user in errors."""
    ray = import_ray()
    global _connections
    if not ray.is_initialized():
        target = address or os.environ.get("RAY_ADDRESS")
        if not target:
            raise ConfigError(
                f"{what} needs the cluster's address", where=where,
                hint="set function_backend.address (e.g. 10.0.0.5:6379, or auto on a node of "
                     "the cluster), pass --ray-address, or export RAY_ADDRESS",
            )
        try:
            ray.init(address=target, namespace="rltune", log_to_driver=False,
                     configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"cannot connect to the Ray cluster at {target}: {exc}", where=where,
                hint="start it with `ray start --head` and pass the address it prints",
            ) from exc
    _connections += 1
    return ray


def disconnect() -> None:
    """Undo one :func:`connect`; the last one leaves the cluster."""
    global _connections
    _connections = max(0, _connections - 1)
    if _connections == 0:
        import ray

        if ray.is_initialized():
            ray.shutdown()


def is_loopback(host: str) -> bool:
    """``host`` names this machine only (127.0.0.0/8, ::1, ``localhost``)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cross_host_address(own: str, nodes: Iterable[str], *, what: str, where: str) -> str:
    """The address another node uses to reach a service on this node: ``own`` (the address
    this node registered with the cluster, or a setting). Loopback only while every node of
    the cluster is on loopback too (one host); a cluster that spans hosts with a loopback
    ``own`` is a ``ConfigError`` naming ``where``, since no other node could connect.

    >>> cross_host_address("10.0.0.7", ["10.0.0.5", "10.0.0.7"], what="w", where="x")
    '10.0.0.7'
    >>> cross_host_address("127.0.0.1", ["127.0.0.1"], what="w", where="x")
    '127.0.0.1'
    """
    others = sorted({n for n in nodes if n and not is_loopback(n)})
    if is_loopback(own) and others:
        raise ConfigError(
            f"{what} would be reachable at {own} only, but the Ray cluster spans hosts "
            f"({', '.join(others)})", where=where,
            hint="start every node with `ray start --node-ip-address <its address>` (not "
                 "127.0.0.1), or set function_backend.gateway_host to this machine's address "
                 "in the cluster")
    return own


def alive_node_addresses(ray: Any) -> list[str]:
    """The address each live node of the cluster registered."""
    return [n["NodeManagerAddress"] for n in ray.nodes()
            if n.get("Alive") and n.get("NodeManagerAddress")]


def node_address(ray: Any, what: str = "a service on this node") -> str:
    """The IP address this node registered with the cluster (``ray start --node-ip-address``),
    which is where the driver and the other nodes reach it (never loopback when the cluster
    spans hosts: :func:`cross_host_address`). Runs in an actor."""
    node_id = ray.get_runtime_context().get_node_id()
    own = ray.util.get_node_ip_address()
    for node in ray.nodes():
        if node.get("NodeID") == node_id and node.get("NodeManagerAddress"):
            own = node["NodeManagerAddress"]
    return cross_host_address(own, alive_node_addresses(ray), what=what,
                              where="ray start --node-ip-address")


def interface_of(address: str) -> Optional[str]:
    """The name of this machine's network interface that holds ``address`` (None: none does),
    e.g. for ``GLOO_SOCKET_IFNAME``: gloo otherwise binds what the hostname resolves to, often
    127.0.1.1, which no other host reaches."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == address for a in addrs):
            return name
    return None


def package_env() -> dict[str, Any]:
    """rltune's own package as a local ``runtime_env`` part (``py_modules``)."""
    import rltune

    return {"py_modules": [str(Path(rltune.__file__).resolve().parent)]}


def upload(local: dict[str, Any], scratch_dir: str) -> dict[str, Any]:
    """``local`` (a ``runtime_env`` part naming a local ``working_dir`` or ``py_modules``) with
    the paths uploaded to the cluster as content-addressed ``gcs://`` packages. Ray accepts
    local paths only in ``ray.init``, so this runs the same upload for actors."""
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

    if "working_dir" in local:
        return upload_working_dir_if_needed(dict(local), include_gitignore=False,
                                            scratch_dir=scratch_dir, logger=log)
    return upload_py_modules_if_needed(dict(local), include_gitignore=True,
                                       scratch_dir=scratch_dir, logger=log)


def still_uploaded(env: dict[str, Any]) -> bool:
    """Whether the cluster still holds every package an :func:`upload` result names."""
    from ray._private.runtime_env.packaging import package_exists

    uris = [env["working_dir"]] if "working_dir" in env else env.get("py_modules", [])
    return all(package_exists(u) for u in uris)


def ship_package(scratch_dir: Optional[str] = None) -> dict[str, Any]:
    """rltune's package uploaded for actors (a ``runtime_env`` part), so every node runs the
    driver's version."""
    if scratch_dir is not None:
        return upload(package_env(), scratch_dir)
    with tempfile.TemporaryDirectory(prefix="rltune-ray-") as scratch:
        return upload(package_env(), scratch)
