"""Token-exact capture through a real gateway, and build_rows on hand-made calls."""

from __future__ import annotations

import openai
import pytest
import torch

from rltune.gateway import CapturedCall, build_rows
from rltune.models.tasks import CALCULATOR_TOOL


def call(i, prompt, completion, *, messages=None, choice=0, rid="r"):
    return CapturedCall(rollout_id=rid, call_index=i, choice_index=choice, prompt_ids=prompt,
                        completion_ids=completion, completion_logprobs=[-0.5] * len(completion),
                        finish_reason="stop", messages=messages or [])


def test_build_rows_merges_extends_and_splits():
    a = call(0, [1, 2], [3, 4])
    b = call(1, [1, 2, 3, 4, 7], [5])           # extends a: gap [7] mask 0
    c = call(2, [9, 9], [8])                     # unrelated prompt: new row, not a rewrite
    res = build_rows([c, b, a])                  # order comes from call_index
    assert len(res.rows) == 2 and res.template_rewrites == 0
    r0 = res.rows[0]
    assert r0.input_ids == [1, 2, 3, 4, 7, 5]
    assert r0.loss_mask == [0, 0, 1, 1, 0, 1]
    assert r0.sampled_logprobs == [0, 0, -0.5, -0.5, 0, -0.5]
    assert r0.prompt_length == 2 and r0.call_indices == [(0, 0), (1, 0)]
    assert res.rows[1].input_ids == [9, 9, 8] and res.rows[1].loss_mask == [0, 0, 1]


def test_build_rows_n_choices_continue_their_own_row():
    res = build_rows([call(0, [1], [2], choice=0), call(0, [1], [3], choice=1),
                      call(1, [1, 2, 0], [4]), call(2, [1, 3, 0], [5])])
    assert [r.input_ids for r in res.rows] == [[1, 2, 0, 4], [1, 3, 0, 5]]


def test_build_rows_detects_rewritten_turns():
    m1 = [{"role": "user", "content": "q"}]
    m2 = [*m1, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]
    res = build_rows([call(0, [1, 2], [3, 4], messages=m1),
                      call(1, [1, 2, 3, 6, 4, 7], [5], messages=m2)])
    assert len(res.rows) == 2 and res.template_rewrites == 1
    brk = res.breaks[0]
    assert (brk.call_index, brk.previous_call_index, brk.first_mismatch) == (1, 0, 3)
    assert brk.expected_ids[0] == 4 and brk.found_ids[0] == 6
    with pytest.raises(ValueError, match="one rollout"):
        build_rows([call(0, [1], [2]), call(1, [1], [2], rid="other")])


def fresh_logprobs(model, ids, temperature=1.0):
    """Log-probs of ``ids`` from one forward pass, at the sampling temperature."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits.float() / temperature
        lp = torch.log_softmax(logits, dim=-1)[0]
    return [None] + [lp[i - 1, ids[i]].item() for i in range(1, len(ids))]


async def test_multi_turn_capture_is_token_exact(gateway):
    """Three calls of one tool conversation merge into rows whose mask-1 tokens are exactly
    the sampled ones and whose recorded log-probs match a fresh forward pass at the sampling
    temperature."""
    gateway.register("key-a", "ra")
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="key-a")
    messages = [{"role": "system", "content": "Use the calculator."},
                {"role": "user", "content": "What is 37 * 4?"}]
    for turn in range(3):
        r = await client.chat.completions.create(
            model="m", messages=messages, tools=[CALCULATOR_TOOL], max_tokens=10, seed=turn,
            temperature=0.7)
        messages.append(r.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "user", "content": f"Now turn {turn}: add 1."})
    calls = gateway.pop_calls("ra")
    assert len(calls) == 3
    res = build_rows(calls)
    # Every call either extends a row exactly or the break is reported (never hidden).
    assert len(res.rows) == 1 + res.template_rewrites
    sampled_total = 0
    for row in res.rows:
        assert len(row.input_ids) == len(row.loss_mask) == len(row.sampled_logprobs)
        mine = [c for c in calls if (c.call_index, c.choice_index) in row.call_indices]
        # ids at mask 1, in order, are exactly the sampled ids of the row's calls
        picked = [t for t, m in zip(row.input_ids, row.loss_mask, strict=True) if m]
        assert picked == [t for c in mine for t in c.completion_ids]
        # each call's prompt is an exact prefix of the row, followed by its completion
        for c in mine:
            n = len(c.prompt_ids)
            assert row.input_ids[:n] == c.prompt_ids
            assert row.input_ids[n:n + len(c.completion_ids)] == c.completion_ids
            assert row.loss_mask[n:n + len(c.completion_ids)] == [1] * len(c.completion_ids)
        fresh = fresh_logprobs(gateway.engine.model, row.input_ids, temperature=0.7)
        for i, m in enumerate(row.loss_mask):
            if m:
                assert abs(fresh[i] - row.sampled_logprobs[i]) < 1e-4
        sampled_total += sum(row.loss_mask)
    assert sampled_total == sum(len(c.completion_ids) for c in calls)
    # With token-preserving prompts, this conversation stays one row.
    assert res.template_rewrites == 0 and len(res.rows) == 1
    assert gateway.chat.stats["spliced_prompts"] == 2


async def test_rewritten_history_is_reported(gateway):
    gateway.register("key-b", "rb")
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="key-b")
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    r = await client.chat.completions.create(model="m", messages=messages, max_tokens=6,
                                             seed=0)
    # the client "edits" the assistant turn before sending it back
    messages += [{"role": "assistant", "content": "EDITED " + (r.choices[0].message.content
                                                               or "")},
                 {"role": "user", "content": "and 3 + 3?"}]
    await client.chat.completions.create(model="m", messages=messages, max_tokens=6, seed=1)
    res = build_rows(gateway.pop_calls("rb"))
    assert len(res.rows) == 2 and res.template_rewrites == 1
    assert res.breaks[0].previous_call_index == 0
