"""The multi-hop task of ``agentic_compare.py --task multihop``: chains of facts in a corpus.

A question is a chain of 3-6 arithmetic facts (the hop count long-tailed: 3 most often, 6
rarely). Hop 1 asks ``Compute 3 * 4.``; the agent's model writes the search query (its forced
``calculator`` call: the warm-started nano policy knows only that schema), the agent looks the
query up in the fact corpus through the MCP ``search`` tool (``_mcp_corpus_server.py``) and
hands the model the value it found; hop k asks ``Compute <value found at hop k-1> <op> <n>.``,
so a wrong query sends every later hop to the wrong facts. After the last hop the model answers
``### ANSWER: <n> ###``. Reward: half for the share of hops whose query was the chain's true
fact, half for the right final answer.

Everything here but :class:`McpSearch` is pure Python, shared by rltune's rollout and reward
(this folder) and TRL's side (``benchmarks/_trl_multihop_side.py``).

    >>> chain = make_chain(random.Random(0))
    >>> len(chain["exprs"]) == chain["hops"] and 3 <= chain["hops"] <= 6
    True
    >>> score(chain, chain["exprs"], f"### ANSWER: {chain['values'][-1]} ###")
    1.0
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT, calculate, extract_answer

#: P(hops): most chains are short, a few run twice as long (the episode-length tail).
HOP_WEIGHTS = {3: 0.45, 4: 0.30, 5: 0.15, 6: 0.10}
TOOLS = [CALCULATOR_TOOL]
#: The agent forces each hop's turn to be a call of this tool (OpenAI ``tool_choice``).
FORCED_TOOL = {"type": "function", "function": {"name": "calculator"}}
HOP_TOKENS, ANSWER_TOKENS = 24, 12  # max new tokens of a hop's call and of the final answer
NOT_FOUND = "no results"


def make_chain(rng: random.Random) -> dict[str, Any]:
    """One chain: ``exprs[k]`` is hop k's true fact, ``values[k]`` its value."""
    hops = rng.choices(list(HOP_WEIGHTS), weights=list(HOP_WEIGHTS.values()))[0]
    a, b = rng.randrange(10), rng.randrange(10)
    exprs = [f"{a} {rng.choice('+-*')} {b}"]
    values = [calculate(exprs[0])]
    for _ in range(hops - 1):
        op = rng.choice("+-*" if abs(int(values[-1])) <= 20 else "+-")
        exprs.append(f"{values[-1]} {op} {rng.randrange(1, 10)}")
        values.append(calculate(exprs[-1]))
    steps = [e.split(" ", 1)[1] for e in exprs[1:]]  # "+ 5": the plan after hop 1
    return {"hops": hops, "exprs": exprs, "values": values, "steps": steps}


def question(expression: str) -> str:
    return f"Compute {expression}."


def make_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` dataset rows (the ``RolloutInput`` shape), chains drawn from ``seed``; no two
    share a first question (so a prompt names its chain)."""
    if n > 250:
        raise ValueError(f"at most 250 distinct first questions, asked for {n}")
    rng = random.Random(f"multihop:{seed}")
    rows, seen = [], set()
    while len(rows) < n:
        chain = make_chain(rng)
        if chain["exprs"][0] in seen:
            continue
        seen.add(chain["exprs"][0])
        rows.append({"messages": [{"role": "system", "content": SYSTEM_PROMPT},
                                  {"role": "user", "content": question(chain["exprs"][0])}],
                     "tools": TOOLS,
                     "rollout_extra": {"solution": chain["values"][-1], "chain": chain}})
    return rows


def corpus_of(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The fact corpus: every hop of every row's chain, one passage per distinct fact."""
    facts = {e: v for r in rows for e, v in zip(r["rollout_extra"]["chain"]["exprs"],
                                                 r["rollout_extra"]["chain"]["values"],
                                                 strict=True)}
    return [{"id": f"fact-{i}", "key": e, "text": f"{e} = {v}"}
            for i, (e, v) in enumerate(sorted(facts.items()))]


def normalise(query: str) -> str:
    """``"3*4 "`` and ``"3 * 4"`` name the same fact.

    >>> normalise(" 3*-4 ")
    '3 * -4'
    """
    q = re.sub(r"\s+", "", str(query))
    return re.sub(r"(?<=[0-9)])([-+*/])", r" \1 ", q)


def search_corpus(corpus: list[dict[str, str]], query: str, k: int = 1) -> str:
    """The ``k`` best passages: the exact fact first, then by shared numbers (a wrong query
    finds a wrong fact, as a search engine would)."""
    key = normalise(query)
    words = set(re.findall(r"-?\d+", key))

    def rank(doc: dict[str, str]) -> tuple:
        return (doc["key"] != key, -len(words & set(re.findall(r"-?\d+", doc["key"]))),
                doc["id"])

    hits = [d for d in sorted(corpus, key=rank)[: max(1, min(k, 5))]
            if d["key"] == key or words & set(re.findall(r"-?\d+", d["key"]))]
    return "\n".join(d["text"] for d in hits) or NOT_FOUND


def value_of(passage: str) -> str | None:
    """The value of the first passage (``"3 * 4 = 12"`` → ``"12"``), None if none."""
    found = re.match(r"[^=\n]*=\s*(-?\d+)", passage or "")
    return found.group(1) if found else None


def next_question(chain: dict[str, Any], hop: int, found: str | None) -> str:
    """Hop ``hop``'s (≥ 1) question: the previous hop's found value, then the chain's step."""
    return question(f"{found if found is not None else 0} {chain['steps'][hop - 1]}")


def query_of_call(name: str | None, arguments: Any) -> str:
    """The search query in one tool call (its ``expression``), "" if it has none."""
    if name != "calculator":
        return ""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        return str(args.get("expression", "")) if isinstance(args, dict) else ""
    except (json.JSONDecodeError, TypeError):
        return ""


def queries_in(messages: list[dict[str, Any]]) -> list[str]:
    """The query of each assistant turn that called a tool, in order."""
    out = []
    for m in messages:
        for call in (m.get("tool_calls") or []) if m.get("role") == "assistant" else []:
            fn = call.get("function", call)
            out.append(query_of_call(fn.get("name"), fn.get("arguments")))
    return out


def score_parts(chain: dict[str, Any], queries: list[str], final_text: str) -> tuple[float, bool]:
    """(share of hops queried with the chain's true fact, final answer right)."""
    right = sum(normalise(q) == e for q, e in zip(queries, chain["exprs"], strict=False))
    answer = extract_answer(final_text)
    return right / chain["hops"], answer is not None and answer == str(chain["values"][-1])


def score(chain: dict[str, Any], queries: list[str], final_text: str) -> float:
    """0.5 x the share of hops queried with the true fact + 0.5 x the final answer right."""
    share, ok = score_parts(chain, queries, final_text)
    return round(0.5 * share + 0.5 * float(ok), 6)


class McpSearch:
    """The agent's side of the MCP corpus server: one streamable-HTTP session, ``search``
    calls (one retry after a tool error), counted."""

    def __init__(self, url: str):
        self.url = url
        self.calls = 0

    async def __aenter__(self) -> McpSearch:
        from contextlib import AsyncExitStack

        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        self._stack = AsyncExitStack()
        streams = await self._stack.enter_async_context(streamable_http_client(self.url))
        self.session = await self._stack.enter_async_context(
            ClientSession(streams[0], streams[1]))
        await self.session.initialize()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.aclose()

    async def search(self, query: str) -> tuple[str, int]:
        """The passage text (or an ``error: ...``) and how many calls it took."""
        text, n = "", 0
        for _ in range(2):
            n += 1
            try:
                result = await self.session.call_tool("search", {"query": query, "k": 1})
            except Exception as exc:  # transport trouble: the agent reads it as a tool error
                text = f"error: {type(exc).__name__}"
                continue
            wire = result.model_dump(mode="json", by_alias=True)
            text = "\n".join(c.get("text", "") for c in wire["content"])
            if not wire.get("isError"):
                break
            text = f"error: {text}"
        self.calls += n
        return text, n
