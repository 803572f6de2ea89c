"""A minimal calculator agent loop over ``model.generate`` (batched, multi-turn).

It is what the warm start evaluates with, and what ``rltune models chat`` runs: render the
conversation with the chat template, sample, parse ``<tool_call>`` blocks, really execute the
calculator, append the tool results, repeat until the model answers without a tool call.

Example:
    >>> eps = run_episodes(model, tok, [task_to_row(CalcTask(23, "+", 45))])  # doctest: +SKIP
    >>> eps[0].correct, eps[0].used_tool                                         # doctest: +SKIP
    (True, True)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rltune.models.chat_template import IM_END, TOOL_CALL_START
from rltune.models.tasks import extract_answer, is_correct, run_calculator_tool

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

_CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)


@dataclass
class Episode:
    """One finished conversation of the agent loop."""

    messages: list[dict[str, Any]]
    solution: str | None = None
    final_text: str | None = None
    answer: str | None = None
    correct: bool = False
    used_tool: bool = False
    n_llm_calls: int = 0
    finish: str = "answer"  # answer | length | max_turns | bad_tool_call
    tools: list[dict[str, Any]] | None = field(default=None, repr=False)


def parse_assistant_text(text: str) -> dict[str, Any] | None:
    """Turn generated text into an OpenAI assistant message; None if a tool call is malformed.

    content is the text before the first ``<tool_call>`` minus one trailing newline (the
    inverse of the chat template, so re-rendering is byte-exact); ``arguments`` are re-dumped
    with ``json.dumps`` defaults.
    """
    if TOOL_CALL_START not in text:
        return {"role": "assistant", "content": text}
    calls = []
    for i, raw in enumerate(_CALL_RE.findall(text)):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        calls.append(
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": obj["name"], "arguments": json.dumps(obj.get("arguments"))},
            }
        )
    if not calls:
        return None
    content = text.split(TOOL_CALL_START, 1)[0].removesuffix("\n")
    return {"role": "assistant", "content": content, "tool_calls": calls}


def _run_tool(call: dict[str, Any]) -> str:
    if call["function"]["name"] != "calculator":
        return f"Error: unknown tool {call['function']['name']!r}; the only tool is calculator"
    return run_calculator_tool(call["function"]["arguments"])


def run_episodes(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    rows: list[dict[str, Any]],
    *,
    max_turns: int = 3,
    max_new_tokens: int = 48,
    temperature: float = 1.0,
    seed: int | None = None,
) -> list[Episode]:
    """Run one episode per dataset row (``messages``, ``tools``, ``rollout_extra.solution``).

    All live episodes of a turn are generated in one left-padded batch. ``temperature=0``
    decodes greedily; ``seed`` makes sampling reproducible without touching the caller's RNG.
    """
    import torch

    episodes = [
        Episode(
            messages=[dict(m) for m in row["messages"]],
            solution=(row.get("rollout_extra") or {}).get("solution"),
            tools=row.get("tools"),
        )
        for row in rows
    ]
    eos_ids = {tokenizer.convert_tokens_to_ids(IM_END), tokenizer.eos_token_id}
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        if seed is not None:
            torch.manual_seed(seed)
        live = list(episodes)
        for _ in range(max_turns):
            if not live:
                break
            texts = [
                tokenizer.apply_chat_template(
                    ep.messages, tools=ep.tools, add_generation_prompt=True, tokenize=False
                )
                for ep in live
            ]
            batch = tokenizer(
                texts, add_special_tokens=False, padding=True, return_tensors="pt"
            ).to(device)
            sampling = (
                {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
                if temperature > 0
                else {"do_sample": False}
            )
            out = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=sorted(eos_ids),
                **sampling,
            )
            new = out[:, batch["input_ids"].shape[1] :].tolist()
            still = []
            for ep, ids in zip(live, new, strict=True):
                ep.n_llm_calls += 1
                cut = next((i for i, t in enumerate(ids) if t in eos_ids), None)
                text = tokenizer.decode(ids[:cut] if cut is not None else ids)
                if _step(ep, text, finished=cut is not None):
                    still.append(ep)
            live = still
        for ep in live:
            ep.finish = "max_turns"
    model.train(was_training)
    return episodes


def _step(ep: Episode, text: str, *, finished: bool) -> bool:
    """Apply one generated turn to ``ep``; True if the episode continues."""
    msg = parse_assistant_text(text) if finished else None
    if msg is None or not msg.get("tool_calls"):
        ep.messages.append(msg or {"role": "assistant", "content": text})
        ep.final_text = text
        ep.answer = extract_answer(text)
        ep.correct = ep.solution is not None and is_correct(text, ep.solution)
        ep.finish = "length" if not finished else ("answer" if msg else "bad_tool_call")
        return False
    ep.messages.append(msg)
    ep.used_tool = True
    for call in msg["tool_calls"]:
        ep.messages.append({"role": "tool", "tool_call_id": call["id"], "content": _run_tool(call)})
    return True


def summarize(episodes: list[Episode]) -> dict[str, float]:
    """Accuracy overall, with the tool and without it, and how often the tool was used."""
    n = max(len(episodes), 1)
    tool = [e for e in episodes if e.used_tool]
    direct = [e for e in episodes if not e.used_tool]
    return {
        "accuracy": sum(e.correct for e in episodes) / n,
        "tool_rate": len(tool) / n,
        "tool_accuracy": sum(e.correct for e in tool) / len(tool) if tool else 0.0,
        "direct_accuracy": sum(e.correct for e in direct) / len(direct) if direct else 0.0,
        "format_rate": sum(e.answer is not None for e in episodes) / n,
    }
