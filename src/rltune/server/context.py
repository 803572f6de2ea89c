"""The server's shared state (store, registry, executor, instances) and request helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fastapi import Query, Request

from rltune.functions.registry import FunctionRegistry
from rltune.sdk.errors import ConflictError, NotFoundError
from rltune.server.errors import TooLargeError
from rltune.server.executor import JobExecutor
from rltune.server.instances import InstanceManager
from rltune.server.settings import ServerSettings
from rltune.server.store import Store


@dataclass
class ServerContext:
    settings: ServerSettings
    store: Store
    registry: FunctionRegistry
    executor: JobExecutor
    instances: InstanceManager
    #: ``"bwrap"`` or ``"none"``: how function workers of this server are isolated.
    isolation: str = "none"

    def check_isolated(self, what: str) -> None:
        """Refuse a second workspace when function code is not sandboxed (unless opted in)."""
        if self.settings.allow_unisolated:
            return
        if self.settings.ray_address:
            # Function code on Ray runs unsandboxed on the cluster's nodes, and a Ray cluster
            # runs any code its members submit (this server's machine is one of them).
            raise ConflictError(
                f"{what} would serve a second workspace, but this server runs jobs' functions "
                f"on the Ray cluster at {self.settings.ray_address}, where function code is not "
                "sandboxed and can submit its own work to the cluster",
                where="workspace", hint="give each tenant its own server and cluster, or start "
                "the server with --allow-unisolated (RLTUNE_ALLOW_UNISOLATED=1) if every tenant "
                "trusts every other")
        if self.isolation != "none":
            return
        from rltune.functions.sandbox import bwrap_problem

        raise ConflictError(
            f"{what} would serve a second workspace, but this server cannot isolate function "
            f"code ({bwrap_problem() or 'RLTUNE_FUNCTION_ISOLATION=none'}): one tenant's "
            "functions could read the others' data and the admin key",
            where="workspace", hint="install bubblewrap (apt-get install bubblewrap) and restart "
            "the server, or start it with --allow-unisolated (RLTUNE_ALLOW_UNISOLATED=1) if "
            "every tenant trusts every other")

    def owned(self, table: str, rid: str, workspace: str, what: str, hint: str) -> dict[str, Any]:
        """The record if it exists in ``workspace``; otherwise 404 (other workspaces too)."""
        rec = self.store.get(table, rid, workspace=workspace)
        if rec is None:
            raise NotFoundError(f"no {what} {rid!r}", where=rid, hint=hint)
        return rec


def ctx_of(request: Request) -> ServerContext:
    return request.app.state.ctx


async def read_body_limited(request: Request, limit: int, what: str) -> bytes:
    """The request body, refusing (413) as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLargeError(f"{what} is {int(declared)} bytes; the limit is {limit}",
                            where="request body", hint="split the data or raise the server's "
                            "--max-upload-bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLargeError(f"{what} is larger than the limit of {limit} bytes",
                                where="request body", hint="split the data or raise the "
                                "server's --max-upload-bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def paging(page_no: int, page_size: int) -> tuple[int, int]:
    return (page_no - 1) * page_size, page_size


def page_query(page_no: int = Query(1, ge=1, le=10**6),
               page_size: int = Query(50, ge=1, le=500)) -> tuple[int, int]:
    """The ``page_no`` / ``page_size`` query of a list route (a FastAPI dependency)."""
    return page_no, page_size


def list_page(request: Any, table: str, workspace: str, page_q: tuple[int, int],
              view: Any) -> dict[str, Any]:
    """One page of a workspace's records of ``table``, newest first, each through ``view``."""
    page_no, page_size = page_q
    off, lim = paging(page_no, page_size)
    rows, total = ctx_of(request).store.list(table, workspace=workspace, offset=off,
                                             limit=lim, newest_first=True)
    return page([view(r) for r in rows], total, page_no, page_size)


def page(items: list[Any], total: int, page_no: int, page_size: int,
         extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    return {"items": items, "total": total, "page_no": page_no, "page_size": page_size,
            **(extra or {})}
