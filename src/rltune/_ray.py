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


def node_address(ray: Any) -> str:
    """The IP address this node registered with the cluster (``ray start --node-ip-address``),
    which is where the driver can reach it. Runs in an actor."""
    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == node_id and node.get("NodeManagerAddress"):
            return node["NodeManagerAddress"]
    return ray.util.get_node_ip_address()


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
