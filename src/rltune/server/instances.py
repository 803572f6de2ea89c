"""Function instances loaded inside the server: the one owner of their records and pools.

Every read and write of an instance goes through :class:`InstanceManager`: its record (in the
store's ``instances`` table, scoped by workspace), its running pool and endpoint
(``rltune.functions.front.run_instance``, kept open on an exit stack until the instance is
stopped or the server stops) and its event log. ``FunctionRegistry`` only supplies the spec of
the entity; it keeps no record of server instances. After a restart the records read as
``stopped``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Optional

from rltune.functions.registry import FunctionRegistry, new_instance_id
from rltune.sdk.errors import ConflictError, NotFoundError, ValidationError
from rltune.server.redact import masked
from rltune.server.store import Store

INS_HINT = "list instances: GET /v1/instances; load one: POST /v1/functions/{id}/load"


@dataclass
class _Live:
    stack: contextlib.AsyncExitStack
    pool: Any  # FunctionPool
    token: str  # its endpoint answers only requests carrying it: only this server knows it


class InstanceManager:
    def __init__(self, store: Store, registry: FunctionRegistry):
        self.store, self.registry = store, registry
        self._live: dict[str, _Live] = {}
        self._events: dict[str, list[str]] = {}

    # ---- records -----------------------------------------------------------------------------
    def record(self, workspace: str, instance_id: str) -> Optional[dict[str, Any]]:
        """The stored record of an instance of ``workspace``, or None."""
        return self.store.get("instances", instance_id, workspace=workspace)

    def owned(self, workspace: str, instance_id: str) -> dict[str, Any]:
        """The record if it exists in ``workspace``; otherwise 404 (other workspaces too)."""
        rec = self.record(workspace, instance_id)
        if rec is None:
            raise NotFoundError(f"no function instance {instance_id!r}", where=instance_id,
                                hint=INS_HINT)
        return rec

    def is_live(self, instance_id: str) -> bool:
        return instance_id in self._live

    def view(self, rec: dict[str, Any]) -> dict[str, Any]:
        """The REST shape of a record (``status`` from whether its pool runs)."""
        status = "active" if self.is_live(rec["id"]) else "stopped"
        return {"instance_id": rec["id"], "entity_id": rec["entity_id"], "type": rec["type"],
                "status": status, "trigger_url": rec["trigger_url"] if status == "active" else None,
                "runtime": masked(rec.get("runtime") or {}), "created_at": rec["created_at"]}

    def get(self, workspace: str, instance_id: str) -> dict[str, Any]:
        return self.view(self.owned(workspace, instance_id))

    def list(self, workspace: str, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """A page of views, newest first, and the total."""
        rows, total = self.store.list("instances", workspace=workspace, offset=offset,
                                      limit=limit, newest_first=True)
        return [self.view(r) for r in rows], total

    # ---- events ------------------------------------------------------------------------------
    def event(self, instance_id: str, text: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self._events.setdefault(instance_id, []).append(f"{stamp} {text}")

    def events(self, workspace: str, instance_id: str) -> list[str]:
        self.owned(workspace, instance_id)
        return self._events.get(instance_id, [])

    # ---- lifecycle ---------------------------------------------------------------------------
    async def load(self, workspace: str, entity_id: str, runtime: Optional[dict],
                   timeout: Optional[float]) -> dict[str, Any]:
        """Start a pool and its endpoint for ``entity_id``; return the instance's view."""
        from rltune.functions.auth import new_token
        from rltune.functions.front import run_instance

        spec = self.registry.spec_for(entity_id, runtime or None, timeout)
        stack = contextlib.AsyncExitStack()
        token = new_token()  # other tenants' functions share the loopback with the endpoint
        try:
            pool, url = await stack.enter_async_context(run_instance(spec, token=token))
        except BaseException:
            await stack.aclose()
            raise
        instance_id = new_instance_id(spec.func_type)
        self._live[instance_id] = _Live(stack, pool, token)
        rec = {"id": instance_id, "workspace": workspace, "status": "active",
               "created_at": time.time(), "entity_id": entity_id,
               "type": spec.func_type.value, "trigger_url": f"{url}/api/v1", "url": url,
               "timeout": timeout, "runtime": spec.runtime.model_dump(exclude_none=True)}
        self.store.put("instances", rec)
        self.event(instance_id, f"loaded {entity_id} at {rec['trigger_url']}")
        return self.view(rec)

    async def test(self, workspace: str, instance_id: str, input_data: dict[str, Any],
                   func_type: Optional[str] = None) -> dict[str, Any]:
        """Send one input to a running instance; the output is validated by its type's model."""
        from rltune.functions.auth import HEADER
        from rltune.functions.harness import run_single

        rec = self.owned(workspace, instance_id)
        if not self.is_live(instance_id):
            raise ConflictError(f"instance {instance_id} is stopped", where=instance_id,
                                hint="load the function again: POST /v1/functions/{id}/load")
        if func_type is not None and func_type != rec["type"]:
            raise ValidationError(f"instance {instance_id} is a {rec['type']} function, not "
                                  f"{func_type}", where="type",
                                  hint=f"pass type {rec['type']} or omit it")
        t0 = time.perf_counter()
        out = await run_single(input_data, func_type=rec["type"], instance_url=rec["url"],
                               timeout=rec.get("timeout") or 600,
                               headers={HEADER: self._live[instance_id].token})
        seconds = time.perf_counter() - t0
        self.event(instance_id, f"test: {out.status.value} in {seconds:.2f}s")
        return {"instance_id": instance_id, "status": out.status.value, "seconds": seconds,
                "output": out.model_dump(mode="json")}

    async def stop(self, instance_id: str) -> None:
        """Stop the instance's pool and endpoint; its record stays, as ``stopped``."""
        live = self._live.pop(instance_id, None)
        if live is not None:
            await live.stack.aclose()
            self.event(instance_id, "stopped")
            self.store.update("instances", instance_id, status="stopped")

    async def delete(self, workspace: str, instance_id: str) -> None:
        """Stop the instance and forget its record."""
        self.owned(workspace, instance_id)
        await self.stop(instance_id)
        self.store.delete("instances", instance_id)

    async def stop_entity(self, workspace: str, entity_id: str) -> None:
        """Stop every instance of ``entity_id`` in ``workspace`` (the function is being deleted)."""
        rows, _ = self.store.list("instances", workspace=workspace)
        for rec in rows:
            if rec["entity_id"] == entity_id:
                await self.stop(rec["id"])

    async def close(self) -> None:
        for instance_id in list(self._live):
            with contextlib.suppress(Exception):
                await self.stop(instance_id)
