"""Search rollout (Ark's ``rl_search_mcp_demo``): the model calls the ``search`` tool of the MCP
server named in ``mcp_config.json`` (``mcp_server.py`` over ``corpus/corpus.jsonl``), reads the
passages and answers. Async, wrapped-client mode; one MCP session per rollout."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

from ark_sdk.core.plugin.rollout.proxy import wrap_async_client_inplace
from ark_sdk.resources.pipeline_plugin import rollout
from ark_sdk.types.pipeline_plugin import PluginInstance, Runtime
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext, PluginStatus
from ark_sdk.types.pipeline_plugin.rollout import (
    ChatCompletionSample,
    RolloutInferenceProxy,
    RolloutResult,
)
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from openai import AsyncOpenAI, OpenAIError

ROOT = Path(__file__).resolve().parents[1]


def server_params() -> StdioServerParameters:
    spec = json.loads((ROOT / "mcp_config.json").read_text())["mcpServers"]["search"]
    command = sys.executable if spec["command"] == "python" else spec["command"]
    return StdioServerParameters(command=command, args=[str(ROOT / a) for a in spec["args"]])


async def tool_text(session: ClientSession, call) -> str:
    try:
        result = await session.call_tool(call.function.name,
                                         json.loads(call.function.arguments or "{}"))
    except Exception as exc:  # a bad call is an answer the model can read
        return f"error: {exc}"
    wire = result.model_dump(mode="json", by_alias=True)
    return "\n".join(c.get("text", "") for c in wire["content"])


@rollout(name="search_rollout", runtime=Runtime(instance=PluginInstance.CPU2MEM4,
                                                max_concurrency=32, timeout=300))
async def search_rollout(context: PluginContext, proxy: RolloutInferenceProxy,
                         sample: ChatCompletionSample) -> Optional[RolloutResult]:
    client = wrap_async_client_inplace(AsyncOpenAI(base_url=proxy.url,
                                                   api_key=proxy.jwt_token), proxy=proxy)
    messages = [m.to_openai() for m in sample.messages]
    searches = 0
    async with stdio_client(server_params()) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        listed = (await session.list_tools()).model_dump(mode="json", by_alias=True)
        tools = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description") or "",
            "parameters": t["inputSchema"]}} for t in listed["tools"]]
        for _ in range(int(os.environ.get("MAX_TURNS", "3"))):
            try:
                completion = await client.chat.completions.create(
                    model=sample.model or "nano", messages=messages, tools=tools)
            except OpenAIError as exc:
                return RolloutResult(status=PluginStatus.RETRY, error=str(exc))
            message = completion.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                searches += 1
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": await tool_text(session, call)})
    return RolloutResult(extra={"searches": searches})


if __name__ == "__main__":  # local test: python -m rltune.ark plugins/rollout.py
    import asyncio

    from plugins.answer_grader import contains_answer
    from plugins.test_utils import test_with_dataset

    # the model being trained, and the key of the endpoint (ARK_BASE_URL) that serves it
    LOCAL_TEST_MODEL = os.environ.get("LOCAL_TEST_MODEL", "nano")
    ARK_API_KEY = os.environ.get("ARK_API_KEY", "EMPTY")
    data = Path(__file__).resolve().parents[1] / "data" / "search_dataset_dev_100.jsonl"
    # one sample: limit=1, max_concurrent=1; many: max_concurrent = the job's batch_size
    asyncio.run(test_with_dataset(str(data), search_rollout, contains_answer, limit=8,
                                  max_concurrent=4, model=LOCAL_TEST_MODEL,
                                  api_key=ARK_API_KEY))
