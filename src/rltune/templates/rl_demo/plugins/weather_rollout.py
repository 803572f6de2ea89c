"""Rollout plugin like Ark's ``weather_rollout.py``: the model may call ``get_weather`` (a
small fixed table here: swap in a real weather API) and then answers. Wrapped-client mode."""

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

#: city → (condition, °C): the tool's answers.
WEATHER = {"beijing": ("sunny", 26), "shanghai": ("rainy", 22), "hangzhou": ("cloudy", 24),
           "shenzhen": ("stormy", 29), "chengdu": ("foggy", 18), "harbin": ("snowy", -8)}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Today's weather of a city.",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"city": {"type": "string", "description": "e.g. Beijing"}}}}}


def get_weather(city: str) -> str:
    found = WEATHER.get(str(city).strip().lower())
    if found is None:
        return f"error: no weather for {city!r}; known cities: {', '.join(sorted(WEATHER))}"
    return json.dumps({"city": city, "condition": found[0], "temperature_c": found[1]})


def run_call(call) -> str:
    if call.function.name != "get_weather":
        return f"error: unknown tool {call.function.name}"
    try:
        return get_weather(json.loads(call.function.arguments or "{}").get("city", ""))
    except json.JSONDecodeError as exc:
        return f"error: arguments are not JSON ({exc.msg})"


@rollout(name="weather_rollout", runtime=Runtime(instance=PluginInstance.CPU1MEM2,
                                                 max_concurrency=64, timeout=120))
def weather_rollout(context: PluginContext, proxy: RolloutInferenceProxy,
                    sample: ChatCompletionSample) -> Optional[RolloutResult]:
    client = OpenAI(base_url=proxy.url, api_key=proxy.jwt_token)
    wrap_client_inplace(client, proxy=proxy)
    messages = [m.to_openai() if hasattr(m, "to_openai") else m for m in sample.messages]
    calls = 0
    for _ in range(int(os.environ.get("MAX_TURNS", "3"))):
        completion = client.chat.completions.create(
            model=sample.model or "nano", messages=messages,
            tools=sample.tools or [WEATHER_TOOL])
        message = completion.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            calls += 1
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_call(call)})
    return RolloutResult(extra={"tool_calls": calls})


if __name__ == "__main__":  # local test: python -m rltune.ark plugins/weather_rollout.py
    import asyncio
    from pathlib import Path

    from plugins.test_utils import test_with_dataset
    from plugins.weather_grader import weather_grader

    # the model being trained, and the key of the endpoint (ARK_BASE_URL) that serves it
    LOCAL_TEST_MODEL = os.environ.get("LOCAL_TEST_MODEL", "nano")
    ARK_API_KEY = os.environ.get("ARK_API_KEY", "EMPTY")
    data = Path(__file__).resolve().parents[1] / "data" / "weather.jsonl"
    # one sample: limit=1, max_concurrent=1; many: max_concurrent = the job's batch_size
    asyncio.run(test_with_dataset(str(data), weather_rollout, weather_grader, limit=8,
                                  max_concurrent=4, model=LOCAL_TEST_MODEL,
                                  api_key=ARK_API_KEY))
