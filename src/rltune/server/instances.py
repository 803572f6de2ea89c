"""Function instances loaded inside the server: a running pool per instance id.

``FunctionRegistry.load`` is a context manager; each instance keeps its own exit stack open
until it is deleted or the server stops. Records live in the store (scoped by workspace);
after a restart they read as ``stopped``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Optional

from rltune.functions.registry import FunctionRegistry
from rltune.server.redact import masked
from rltune.server.store import Store


class InstanceManager:
    def __init__(self, store: Store, registry: FunctionRegistry):
        self.store, self.registry = store, registry
        self.live: dict[str, tuple[contextlib.AsyncExitStack, Any]] = {}
        self.events: dict[str, list[str]] = {}

    def event(self, instance_id: str, text: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.events.setdefault(instance_id, []).append(f"{stamp} {text}")

    async def load(self, workspace: str, entity_id: str, runtime: Optional[dict],
                   timeout: Optional[float]) -> dict[str, Any]:
        stack = contextlib.AsyncExitStack()
        try:
            loaded = await stack.enter_async_context(
                self.registry.load(entity_id, runtime or None, timeout))
        except BaseException:
            await stack.aclose()
            raise
        inst = loaded.instance
        self.live[inst.instance_id] = (stack, loaded.pool)
        rec = {"id": inst.instance_id, "workspace": workspace, "status": "active",
               "created_at": inst.created_at, "entity_id": entity_id,
               "type": inst.func_type.value, "trigger_url": inst.trigger_url, "url": inst.url,
               "timeout": timeout, "runtime": inst.runtime.model_dump(exclude_none=True)}
        self.store.put("instances", rec)
        self.event(inst.instance_id, f"loaded {entity_id} at {inst.trigger_url}")
        return rec

    def view(self, rec: dict[str, Any]) -> dict[str, Any]:
        status = "active" if rec["id"] in self.live else "stopped"
        return {"instance_id": rec["id"], "entity_id": rec["entity_id"], "type": rec["type"],
                "status": status, "trigger_url": rec["trigger_url"] if status == "active" else None,
                "runtime": masked(rec.get("runtime") or {}), "created_at": rec["created_at"]}

    async def stop(self, instance_id: str) -> None:
        live = self.live.pop(instance_id, None)
        if live is not None:
            await live[0].aclose()
            self.event(instance_id, "stopped")
            self.store.update("instances", instance_id, status="stopped")

    async def close(self) -> None:
        for instance_id in list(self.live):
            with contextlib.suppress(Exception):
                await self.stop(instance_id)
