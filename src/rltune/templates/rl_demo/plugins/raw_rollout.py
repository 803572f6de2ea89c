"""Rollout plugins, raw mode: the rollout tells the proxy about each call itself.

Like Ark's ``raw_rollout.py``: ``update_state_from_messages`` before a call, the proxy's extra
body and headers with it, ``process_completion`` after it. ``raw_weather_rollout`` is Ark's
weather demo in that mode (synchronous: the decorator runs it in threads);
``raw_calc_rollout`` the calculator task of ``job.yaml`` (async, so it must not block).
"""

from __future__ import annotations

import os
from typing import Optional

from ark_sdk.resources.pipeline_plugin import rollout
from ark_sdk.types.pipeline_plugin import PluginInstance, Runtime
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext
from ark_sdk.types.pipeline_plugin.rollout import (
    ChatCompletionMessage,
    ChatCompletionResponse,
    ChatCompletionSample,
    PluginStatus,
    RolloutInferenceProxy,
    RolloutResult,
)
from openai import AsyncOpenAI, OpenAI, OpenAIError

from plugins.calc_rollout import add_turn
from plugins.calc_tools import CALCULATOR_TOOL
from plugins.weather_rollout import WEATHER_TOOL, run_call


@rollout(name="raw_weather_rollout",
         runtime=Runtime(instance=PluginInstance.CPU1MEM2, max_concurrency=64, timeout=120))
def raw_weather_rollout(
    context: PluginContext,
    proxy: RolloutInferenceProxy,
    sample: ChatCompletionSample,
) -> Optional[RolloutResult]:
    client = OpenAI(base_url=proxy.url, api_key=proxy.jwt_token)
    messages = [m.model_dump(exclude_none=True) for m in sample.messages]
    calls = 0
    for _ in range(int(os.environ.get("MAX_TURNS", "3"))):
        proxy.update_state_from_messages([ChatCompletionMessage(**m) for m in messages])
        try:
            completion = client.chat.completions.create(
                model=sample.model or "nano", messages=messages,
                tools=sample.tools or [WEATHER_TOOL], extra_body=proxy.get_extra_body(),
                extra_headers=proxy.headers)
        except OpenAIError as exc:  # the endpoint failed: retry this rollout
            return RolloutResult(status=PluginStatus.RETRY, error=str(exc))
        proxy.process_completion(ChatCompletionResponse(**completion.model_dump()))
        message = completion.choices[0].message
        messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            calls += 1
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_call(call)})
    return RolloutResult(status=PluginStatus.SUCCESS, extra={"tool_calls": calls})


@rollout(runtime=Runtime(instance=PluginInstance.CPU1MEM2, max_concurrency=64, timeout=120))
async def raw_calc_rollout(
    context: PluginContext,
    proxy: RolloutInferenceProxy,
    sample: ChatCompletionSample,
) -> Optional[RolloutResult]:
    client = AsyncOpenAI(base_url=proxy.url, api_key=proxy.jwt_token)
    req = sample.model_dump()
    messages = req.pop("messages")
    tools = req.pop("tools") or [CALCULATOR_TOOL]
    for _ in range(int(os.environ.get("MAX_TURNS", "3"))):
        proxy.update_state_from_messages([ChatCompletionMessage(**m) for m in messages])
        try:
            completion = await client.chat.completions.create(
                model=sample.model or "nano", messages=messages, tools=tools,
                extra_body=proxy.get_extra_body(), extra_headers=proxy.headers)
        except OpenAIError as exc:  # the endpoint failed: retry this rollout
            return RolloutResult(status=PluginStatus.RETRY, error=str(exc))
        proxy.process_completion(ChatCompletionResponse(**completion.model_dump()))
        if not add_turn(messages, completion):
            break
    return RolloutResult(status=PluginStatus.SUCCESS, extra={"turns": len(messages)})


if __name__ == "__main__":  # local test: python -m rltune.ark plugins/raw_rollout.py
    import asyncio
    from pathlib import Path

    from plugins.random_reward import random_reward
    from plugins.test_utils import test_with_dataset

    # the model being trained, and the key of the endpoint (ARK_BASE_URL) that serves it
    LOCAL_TEST_MODEL = os.environ.get("LOCAL_TEST_MODEL", "nano")
    ARK_API_KEY = os.environ.get("ARK_API_KEY", "EMPTY")
    data = Path(__file__).resolve().parents[1] / "data" / "weather.jsonl"
    # one sample: limit=1, max_concurrent=1; many: max_concurrent = the job's batch_size
    asyncio.run(test_with_dataset(str(data), raw_weather_rollout, random_reward, limit=6,
                                  max_concurrent=3, model=LOCAL_TEST_MODEL,
                                  api_key=ARK_API_KEY))
