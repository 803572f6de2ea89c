"""Search agent: the policy calls the ``search`` tool of an MCP server (mcp_server.py, started
once per worker and reached with the MCP client), reads the passages, and answers.

The tool list the model sees is the server's own (``list_tools``), so adding a tool to the
server adds it to the agent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from openai import AsyncOpenAI

from rltune.sdk import (
    AbstractRolloutProcessor,
    AgentOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


class SearchRollout(AbstractRolloutProcessor):
    async def setup(self) -> None:
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._task = asyncio.create_task(self._hold_session())
        waiter = asyncio.create_task(self._ready.wait())
        await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():  # the server failed to start: say why
            waiter.cancel()
            self._task.result()

    async def _hold_session(self) -> None:
        """Own the MCP session for the worker's lifetime (its task groups live in this task)."""
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            wire = [t.model_dump(mode="json", by_alias=True) for t in listed.tools]
            self.tools = [{"type": "function", "function": {
                "name": t["name"], "description": t.get("description") or "",
                "parameters": t["inputSchema"]}} for t in wire]
            self.session = session
            self._ready.set()
            await self._stop.wait()

    async def call_tool(self, name: str, arguments: str) -> str:
        """One MCP tool call; a bad call becomes an error message the model can read."""
        try:
            result = await self.session.call_tool(name, json.loads(arguments or "{}"))
        except Exception as exc:
            return f"error: {exc}"
        wire = result.model_dump(mode="json", by_alias=True)  # the same in mcp 1.x and 2.x
        text = "\n".join(c.get("text", "") for c in wire["content"])
        return f"error: {text}" if wire.get("isError") else text

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        res = input_data.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value())
        params = dict(input_data.sampling_params or {})
        max_turns = int(params.pop("max_turns", 3))
        params.pop("timeout", None)
        messages = list(input_data.messages)
        searches = 0
        try:
            for _ in range(max_turns):
                response = await client.chat.completions.create(
                    model=res.model_name, messages=messages, tools=self.tools, **params)
                message = response.choices[0].message
                messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    searches += 1
                    messages.append({"role": "tool", "tool_call_id": call.id, "content":
                                     await self.call_tool(call.function.name,
                                                          call.function.arguments)})
        except Exception as exc:  # the policy endpoint failed: retry, never score
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input_data.rollout_extra,
            rollout_metrics={"tool_calls": float(searches)}))
