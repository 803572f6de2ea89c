"""Every sampled token keeps the weight version that sampled it, across a weight update in the
middle of a rollout (the asynchronous pipeline's staleness, trainer/staleness.py)."""

from __future__ import annotations

import asyncio

import openai
import torch

from rltune.gateway import build_rows
from rltune.rollout.results import RolloutResult
from rltune.trainer.staleness import rollout_staleness, sampled_versions


def perturbed(engine) -> dict:
    return {k: v + 0.01 * torch.randn_like(v) if v.is_floating_point() else v
            for k, v in engine.model.state_dict().items()}


async def test_tokens_keep_their_version_across_a_mid_rollout_update(gateway):
    engine = gateway.engine
    gateway.register("key-v", "rv")
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="key-v")
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    long = {"min_tokens": 12, "ignore_eos": True}

    first = await client.chat.completions.create(model="m", messages=messages, max_tokens=12,
                                                 extra_body=long, seed=0)
    messages.append({"role": "assistant", "content": first.choices[0].message.content})
    messages.append({"role": "user", "content": "And 3 + 3?"})

    # Turn 2 streams; the weights change while its tokens are being sampled.
    stream = await client.chat.completions.create(model="m", messages=messages, max_tokens=12,
                                                  extra_body=long, seed=1, stream=True)
    text, update, after = "", None, 0
    async for chunk in stream:
        piece = chunk.choices[0].delta.content if chunk.choices else None
        text += piece or ""
        after += bool(piece and update is not None)
        if piece and update is None:  # a sampled token arrived: the turn is running
            update = asyncio.create_task(engine.update_weights(perturbed(engine)))
    assert update is not None, "the streamed turn sent no text"
    assert after > 0, "the update started only after the turn had ended"
    assert await update == 1
    messages.append({"role": "assistant", "content": text})
    messages.append({"role": "user", "content": "And 4 + 4?"})
    await client.chat.completions.create(model="m", messages=messages, max_tokens=12,
                                         extra_body=long, seed=2)

    rows = build_rows(gateway.pop_calls("rv")).rows
    per_call = [[v for v, m in zip(r.token_versions, r.loss_mask, strict=True) if m]
                for r in rows]
    versions = [v for vs in per_call for v in vs]
    assert len(versions) == 36
    # No completion mixes versions: the engine finished the running turn on the old weights
    # and swapped them before the next one. The first two turns are version 0, the third 1.
    assert versions == [0] * 24 + [1] * 12, versions
    for row in rows:  # unsampled positions carry no version
        assert all(v == -1 for v, m in zip(row.token_versions, row.loss_mask, strict=True)
                   if not m)
        assert len(row.token_versions) == len(row.input_ids)

    result = RolloutResult("rv", "s", 0, 0, ok=True, score=1.0, sequences=rows)
    assert sampled_versions(result) == versions
    assert rollout_staleness(result, policy_version=engine.weight_version) == 1
