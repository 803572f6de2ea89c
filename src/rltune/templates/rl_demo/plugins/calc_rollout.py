"""Rollout plugin, wrapped-client mode: the proxy records every call of the client by itself.

Like Ark's ``weather_rollout.py``, with the calculator tool the demo model knows. ``MAX_TURNS``
comes from the plugin's ``envs`` in job.yaml.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from ark_sdk.core.plugin.rollout.proxy import wrap_client_inplace
from ark_sdk.resources.pipeline_plugin import rollout
from ark_sdk.types.pipeline_plugin import PluginInstance, Runtime
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext
from ark_sdk.types.pipeline_plugin.rollout import (
    ChatCompletionSample,
    RolloutInferenceProxy,
    RolloutResult,
)
from openai import OpenAI

from plugins.calc_tools import CALCULATOR_TOOL, calculate


def run_tool(call) -> str:
    """Run one calculator call; a bad call becomes an error message the model can read."""
    if call.function.name != "calculator":
        return f"error: unknown tool {call.function.name}"
    try:
        return calculate(str(json.loads(call.function.arguments)["expression"]))
    except Exception as exc:
        return f"error: {exc}"


def add_turn(messages: list, completion) -> bool:
    """Append the model's message and the results of its tool calls; False when it is done."""
    message = completion.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    if completion.choices[0].finish_reason != "tool_calls":
        return False
    for call in message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call)})
    return True


@rollout(
    name="calc_rollout",
    runtime=Runtime(instance=PluginInstance.CPU1MEM2, max_concurrency=64, max_replicas=2,
                    timeout=120),
)
def calc_rollout(  # sync: the decorator runs it in threads
    context: PluginContext,
    proxy: RolloutInferenceProxy,
    sample: ChatCompletionSample,
) -> Optional[RolloutResult]:
    client = OpenAI(base_url=proxy.url, api_key=proxy.jwt_token)
    wrap_client_inplace(client, proxy=proxy)  # sampling params and recording: automatic
    req = sample.model_dump()
    messages = req.pop("messages")
    tools = req.pop("tools") or [CALCULATOR_TOOL]
    for _ in range(int(os.environ.get("MAX_TURNS", "3"))):
        completion = client.chat.completions.create(
            model=sample.model or "nano", messages=messages, tools=tools)
        if not add_turn(messages, completion):
            break
    return None  # success; the proxy's recorded turns are the trajectory


if __name__ == "__main__":  # local test: python -m rltune.ark plugins/calc_rollout.py
    import asyncio
    from pathlib import Path

    from plugins.exact_grader import exact_grader
    from plugins.test_utils import test_with_dataset

    # the model being trained, and the key of the endpoint (ARK_BASE_URL) that serves it
    LOCAL_TEST_MODEL = os.environ.get("LOCAL_TEST_MODEL", "nano")
    ARK_API_KEY = os.environ.get("ARK_API_KEY", "EMPTY")
    data = Path(__file__).resolve().parents[1] / "data" / "val.jsonl"
    # one sample: limit=1, max_concurrent=1; many: max_concurrent = the job's batch_size
    asyncio.run(test_with_dataset(str(data), calc_rollout, exact_grader, limit=8,
                                  max_concurrent=4, model=LOCAL_TEST_MODEL,
                                  api_key=ARK_API_KEY))
