"""Ark's default rollout (a pipeline without one): one model call per sample.

Written as an Ark plugin so that graders receive the same sample and trajectory as they would
after a user's rollout.
"""

from __future__ import annotations

from typing import Any

import httpx

from rltune.ark.plugins import rollout
from rltune.ark.proxy import InferenceProxy
from rltune.ark.types import ChatCompletionSample, PluginStatus, RolloutResult


@rollout(name="single_turn", description="one chat completion per sample")
async def single_turn(context: Any, proxy: InferenceProxy,
                      sample: ChatCompletionSample) -> RolloutResult | None:
    messages = [m.to_openai() for m in sample.messages]
    proxy.update_state_from_messages(messages)
    body: dict[str, Any] = {"model": sample.model, "messages": messages,
                            **proxy.get_extra_body()}
    if sample.tools:
        body["tools"] = sample.tools
    async with httpx.AsyncClient(timeout=600.0) as http:
        resp = await http.post(proxy.url.rstrip("/") + "/chat/completions", json=body,
                               headers={**proxy.headers,
                                        "Authorization": f"Bearer {proxy.jwt_token}"})
    if resp.status_code != 200:
        return RolloutResult(status=PluginStatus.RETRY,
                             error=f"policy call failed ({resp.status_code}): {resp.text[:500]}")
    proxy.process_completion(resp.json())
    return None
