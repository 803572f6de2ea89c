"""Rollout plugin, raw mode: the rollout tells the proxy about each call itself.

Like Ark's ``raw_rollout.py``: ``update_state_from_messages`` before a call, the proxy's extra
body and headers with it, ``process_completion`` after it. Async, so it must not block.
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
from openai import AsyncOpenAI, OpenAIError

from plugins.calc_rollout import add_turn
from plugins.calc_tools import CALCULATOR_TOOL


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
