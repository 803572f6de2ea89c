"""Single grader of the weather task: 1 when the final answer states the city's temperature
(``extra.answer``, in °C) and its condition (``extra.condition``), 0.5 for one of them."""

from __future__ import annotations

import re

from ark_sdk.resources.pipeline_plugin import single_grader
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext
from ark_sdk.types.pipeline_plugin.rollout import ChatCompletionSample, Trajectory


@single_grader(name="weather")
def weather_grader(context: PluginContext, sample: ChatCompletionSample,
                   trajectory: Trajectory) -> float:
    final = next((m.content for m in reversed(trajectory.messages)
                  if m.role == "assistant" and isinstance(m.content, str) and m.content), "")
    extra = sample.extra or {}
    numbers = re.findall(r"-?\d+", final)
    temperature = str(extra.get("answer")) in numbers
    condition = str(extra.get("condition", "")).lower() in final.lower()
    return (float(temperature) + float(condition)) / 2
