"""The prompt cache returns exactly what a fresh render and tokenization would, and is bounded."""

from __future__ import annotations

from rltune.gateway.promptcache import PromptCache
from rltune.gateway.protocol import ChatCompletionRequest

TOOL = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}


def chat(messages, tools=None, **kw):
    return ChatCompletionRequest.model_validate(
        {"model": "m", "messages": messages, **({"tools": tools} if tools else {}), **kw})


def fresh_ids(tok, messages, tools):
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                   add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


def test_lru_bounds_and_long_texts_are_not_kept():
    c = PromptCache(max_entries=2, max_chars=10)
    for i in range(3):
        c.put_ids(f"t{i}", [i])
    assert c.ids("t0") is None and c.ids("t2") == [2]  # the oldest left
    c.put_ids("x" * 11, [1])
    assert c.ids("x" * 11) is None
    assert c.key([{"a": object()}], None, {}) is None  # not JSON: never cached


async def test_a_repeated_prompt_is_served_from_the_cache_with_the_same_ids(gateway):
    svc, tok = gateway.chat, gateway.chat.tok
    system = {"role": "system", "content": "You are a careful assistant."}
    msgs = [system, {"role": "user", "content": "What is 12 + 30?"}]
    first = svc.prepare(chat(msgs, [TOOL]))
    hits = dict(svc.cache.stats)
    again = [svc.prepare(chat(msgs, [TOOL])) for _ in range(3)]
    assert svc.cache.stats["render_hits"] == hits["render_hits"] + 3
    assert svc.cache.stats["token_hits"] == hits["token_hits"] + 3
    expected = fresh_ids(tok, msgs, [TOOL])
    assert first.prompt_ids == expected
    assert all(p.prompt_ids == expected for p in again)
    # the cached list is a copy: changing one call's ids does not change the next one's
    again[0].prompt_ids.append(0)
    assert svc.prepare(chat(msgs, [TOOL])).prompt_ids == expected
    # anything that changes the render misses: other tools, other messages, forced tool call
    no_tools = svc.prepare(chat(msgs))
    assert no_tools.prompt_ids == fresh_ids(tok, msgs, None) != expected
    other = [system, {"role": "user", "content": "What is 12 + 31?"}]
    assert svc.prepare(chat(other, [TOOL])).prompt_ids == fresh_ids(tok, other, [TOOL])
    forced = svc.prepare(chat(msgs, [TOOL], tool_choice="required"))
    assert forced.prompt_ids[:len(expected)] == expected and len(forced.prompt_ids) > len(
        expected)
    assert gateway.stats()["prompt_cache"]["render_hits"] >= 3
