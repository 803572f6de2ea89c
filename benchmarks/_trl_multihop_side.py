"""TRL half of ``agentic_compare.py --task multihop``: ``GRPOTrainer`` with a ``rollout_func``.

``python _trl_multihop_side.py SPEC.json OUT.json`` (run by ``agentic_compare.py`` in its own
process). TRL's ``tools=`` loop cannot drive this agent: it generates again only while the model
keeps calling tools, and the hops here are the agent's (a forced call per hop, then a question
built from the value found). So the agent is TRL's other hook for multi-turn episodes, a
``rollout_func``: the same hops as rltune's rollout (``agentic_ws/functions/multihop.py``, the
shared pieces in ``multihop_task.py``), in rounds over the whole batch: one batched
``generate`` per round (TRL's own ``_generate_single_turn``), then that round's searches **all
at once** (``asyncio.gather`` over one MCP session), which is kinder to TRL than its own tool
loop (one rollout's tool calls after another's). Prompts and the forced call's opening are
rendered by the same chat template, so the token streams match rltune's; the tokens the agent
added (forced openings, tool results, questions) train with mask 0 (``env_mask``). Same model,
data, MCP server, reward, batch, lr, steps, GSPO-like clipping, no KL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "agentic_ws"))
from _trl_side import _time_calls, agentic_config, agentic_result, step_clock  # noqa: E402
from functions.multihop_task import (  # noqa: E402
    ANSWER_TOKENS,
    HOP_TOKENS,
    TOOLS,
    McpSearch,
    make_rows,
    next_question,
    query_of_call,
    score_parts,
    value_of,
)

FORCED_PREFIX = '<tool_call>\n{"name": "calculator", "arguments":'  # the gateway's, for hermes


class SearchThread:
    """One MCP session held by a task on a background event loop (TRL's loop is synchronous)."""

    def __init__(self, url: str):
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self._opened: concurrent.futures.Future = concurrent.futures.Future()
        self.holder = asyncio.run_coroutine_threadsafe(self._hold(url), self.loop)
        self.search: McpSearch = self._opened.result(60)

    async def _hold(self, url: str) -> None:
        self.stop = asyncio.Event()
        try:
            async with McpSearch(url) as search:
                self._opened.set_result(search)
                await self.stop.wait()
        except BaseException as exc:
            if not self._opened.done():
                self._opened.set_exception(exc)
            raise

    def gather(self, queries: list[str]) -> list[tuple[str, int]]:
        async def run():
            return await asyncio.gather(*(self.search.search(q) for q in queries))

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        try:
            self.holder.result(20)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)


class Episode:
    """One rollout's conversation (text) and token stream (ids, mask 1 where sampled)."""

    def __init__(self, tok: Any, messages: list[dict], chain: dict):
        self.tok, self.chain = tok, chain
        self.messages = [dict(m) for m in messages]
        self.text = self.render()
        self.prompt_ids = tok.encode(self.text, add_special_tokens=False)
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.queries: list[str] = []
        self.final = ""
        self.calls = 0
        self.t0 = time.perf_counter()
        self.seconds = 0.0

    def render(self) -> str:
        return self.tok.apply_chat_template(self.messages, tools=TOOLS, tokenize=False,
                                            add_generation_prompt=True)

    def add_env(self, text: str) -> None:
        if text:
            ids = self.tok.encode(text, add_special_tokens=False)
            self.ids += ids
            self.mask += [0] * len(ids)

    def context(self) -> list[int]:
        return self.prompt_ids + self.ids

    def add_sampled(self, ids: list[int], prefix: str) -> str:
        """Append a sampled turn; returns its text (without the closing ``<|im_end|>``)."""
        self.ids += ids
        self.mask += [1] * len(ids)
        text = self.tok.decode(ids, skip_special_tokens=False)
        ended = text.endswith("<|im_end|>")
        sampled = text[: -len("<|im_end|>")] if ended else text
        self.messages.append({"role": "assistant", "content": prefix + sampled})
        self._ended, self._sampled = ended, sampled
        return prefix + sampled

    def follow(self, new_messages: list[dict], prefix: str) -> None:
        """Add the agent's messages after the last turn, rendered by the chat template, then
        the next turn's forced opening."""
        before = self.text + self._sampled  # self.text ends with the turn's forced opening
        self.messages += new_messages
        self.text = self.render()
        if not self.text.startswith(before):
            raise RuntimeError("the chat template is not prefix-stable for this conversation")
        env = self.text[len(before):]
        if self._ended:  # the model's own <|im_end|> is already in the stream
            env = env[len("<|im_end|>"):]
        self.add_env(env + prefix)
        self.text += prefix


def _query(content: str) -> str:
    found = re.search(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", content, re.S)
    if not found:
        return ""
    try:
        call = json.loads(found.group(1))
    except json.JSONDecodeError:
        return ""
    return query_of_call(call.get("name"), call.get("arguments")) if isinstance(call, dict) else ""


def make_rollout_func(chains: dict[str, dict], searcher: SearchThread, shapes: list[dict]):
    """TRL's ``rollout_func`` for the multi-hop agent; each episode's shape lands in ``shapes``."""
    def generate(trainer: Any, eps: list[Episode], max_new: int) -> list[list[int]]:
        if not eps:
            return []
        saved = trainer.generation_config.max_new_tokens
        trainer.generation_config.max_new_tokens = max_new
        try:
            ids, _ = trainer._generate_single_turn([e.context() for e in eps], None, {}, 1)
        finally:
            trainer.generation_config.max_new_tokens = saved
        return ids

    def rollout_func(prompts: list, trainer: Any) -> dict[str, Any]:
        tok = trainer.processing_class
        eps = [Episode(tok, p, chains[p[-1]["content"]]) for p in prompts]
        for e in eps:
            e.add_env(FORCED_PREFIX)
            e.text += FORCED_PREFIX
        for hop in itertools.count():
            hoppers = [e for e in eps if hop < e.chain["hops"]]
            answerers = [e for e in eps if hop == e.chain["hops"]]
            if not hoppers and not answerers:
                break
            for e, ids in zip(hoppers, generate(trainer, hoppers, HOP_TOKENS), strict=True):
                e.queries.append(_query(e.add_sampled(ids, FORCED_PREFIX)))
            for e, ids in zip(answerers, generate(trainer, answerers, ANSWER_TOKENS),
                              strict=True):
                e.final = e.add_sampled(ids, "")
                e.seconds = time.perf_counter() - e.t0
            results = searcher.gather([e.queries[-1] for e in hoppers])
            for e, (passage, n) in zip(hoppers, results, strict=True):
                e.calls += n
                found = value_of(passage)
                tool = {"role": "tool", "content": found if found is not None else passage}
                if hop + 1 < e.chain["hops"]:
                    e.follow([tool, {"role": "user",
                                     "content": next_question(e.chain, hop + 1, found)}],
                             FORCED_PREFIX)
                else:
                    e.follow([tool], "")
        shapes.extend({"tool_calls": e.calls, "hops": e.chain["hops"],
                       "seconds": round(e.seconds, 3)} for e in eps)
        return {"prompt_ids": [e.prompt_ids for e in eps], "completion_ids": [e.ids for e in eps],
                "logprobs": None, "env_mask": [e.mask for e in eps],
                "queries": [e.queries for e in eps], "final_text": [e.final for e in eps]}

    return rollout_func


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    from rltune.models import load_tokenizer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    torch.manual_seed(spec["seed"])
    rows = make_rows(spec["steps"] * spec["batch_size"], seed=1)  # rltune's training rows
    chains = {r["messages"][-1]["content"]: r["rollout_extra"]["chain"] for r in rows}
    dataset = Dataset.from_dict({"prompt": [r["messages"] for r in rows],
                                 "chain": [json.dumps(r["rollout_extra"]["chain"])
                                           for r in rows]})

    parts: dict[str, list[float]] = {"hops_right": [], "final_right": []}

    def multihop_reward(completions: list, chain: list[str], queries: list, final_text: list,
                        **_: Any) -> list[float]:
        split = [score_parts(json.loads(c), q, f)
                 for c, q, f in zip(chain, queries, final_text, strict=True)]
        parts["hops_right"].append(sum(s for s, _ in split) / len(split))
        parts["final_right"].append(sum(ok for _, ok in split) / len(split))
        return [round(0.5 * s + 0.5 * ok, 6) for s, ok in split]

    tok = load_tokenizer(spec["model"])
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)
    searcher = SearchThread(spec["tool_url"])
    clock, shapes = step_clock(), []
    try:
        with tempfile.TemporaryDirectory(prefix="trl-multihop-") as out_dir:
            config = agentic_config(spec, out_dir, spec["max_length"])
            trainer = GRPOTrainer(
                model=model, reward_funcs=multihop_reward, args=config, train_dataset=dataset,
                processing_class=tok, callbacks=[clock],
                rollout_func=make_rollout_func(chains, searcher, shapes))
            generate_s = _time_calls(trainer, "_generate")
            t0 = time.perf_counter()
            trainer.train()
            train_s = time.perf_counter() - t0
    finally:
        searcher.close()
    return agentic_result(clock, spec, train_s, generate_s, episodes=shapes, reward_parts=parts)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(spec)))


if __name__ == "__main__":
    main()
