"""The multi-hop agentic benchmark's task and MCP corpus server (``benchmarks/``).

The server is the real one, started as a process and reached over loopback with the MCP
client the agents use; the benchmark itself (``agentic_compare.py --task multihop``) is where
the episodes' 3-6 calls are measured.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load_task():
    """``agentic_ws/functions/multihop_task.py`` under its own name: a ``functions`` package on
    sys.path would shadow the workspaces other tests load."""
    path = BENCH / "agentic_ws" / "functions" / "multihop_task.py"
    spec = importlib.util.spec_from_file_location("bench_multihop_task", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


task = _load_task()
McpSearch, corpus_of, make_rows = task.McpSearch, task.corpus_of, task.make_rows
next_question, normalise, score = task.next_question, task.normalise, task.score
search_corpus, value_of = task.search_corpus, task.value_of


def test_chains_are_three_to_six_hops_long_tailed_and_consistent():
    rows = make_rows(200, seed=1)
    hops = collections.Counter(r["rollout_extra"]["chain"]["hops"] for r in rows)
    assert set(hops) == {3, 4, 5, 6}
    assert hops[3] > hops[4] > hops[6]  # most chains short, few long
    assert len({r["messages"][-1]["content"] for r in rows}) == 200  # a prompt names its chain
    for r in rows:
        chain = r["rollout_extra"]["chain"]
        for k in range(1, chain["hops"]):  # hop k starts from hop k-1's value
            assert chain["exprs"][k] == f"{chain['values'][k - 1]} {chain['steps'][k - 1]}"
            assert next_question(chain, k, chain["values"][k - 1]) == \
                f"Compute {chain['exprs'][k]}."


def test_the_corpus_search_finds_the_exact_fact_first_and_a_wrong_query_a_wrong_fact():
    corpus = [{"id": "fact-0", "key": "3 * 4", "text": "3 * 4 = 12"},
              {"id": "fact-1", "key": "12 + 5", "text": "12 + 5 = 17"},
              {"id": "fact-2", "key": "4 - 3", "text": "4 - 3 = 1"}]
    assert search_corpus(corpus, "3*4") == "3 * 4 = 12"
    assert search_corpus(corpus, "4 - 3") == "4 - 3 = 1"
    assert search_corpus(corpus, "12 - 5") == "12 + 5 = 17"  # nearest, not the asked fact
    assert search_corpus(corpus, "99 + 98") == "no results"
    assert value_of("12 + 5 = 17") == "17" and value_of("no results") is None


def test_score_is_half_hops_half_final_answer():
    chain = {"hops": 4, "exprs": ["3 * 4", "12 + 5", "17 - 2", "15 * 2"],
             "values": ["12", "17", "15", "30"], "steps": ["+ 5", "- 2", "* 2"]}
    assert score(chain, ["3*4", "12 + 5", "17 - 2", "15 * 2"], "### ANSWER: 30 ###") == 1.0
    assert score(chain, ["3 * 4", "12 + 6"], "### ANSWER: 31 ###") == 0.125
    assert score(chain, [], "### ANSWER: 30 ###") == 0.5
    assert normalise(" -2*8") == "-2 * 8"


@pytest.fixture
def corpus_server(tmp_path):
    """Start ``_mcp_corpus_server.py``; yields ``start(fail)`` → (MCP url, stats url)."""
    procs = []

    def start(fail: float) -> tuple[str, str]:
        corpus = tmp_path / f"corpus-{fail}.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in corpus_of(make_rows(20, 1))))
        port = tmp_path / f"port-{fail}"
        port.write_text("")
        procs.append(subprocess.Popen(
            [sys.executable, str(BENCH / "_mcp_corpus_server.py"), "--corpus", str(corpus),
             "--port-file", str(port), "--median", "0.01", "--fail", str(fail)]))
        deadline = time.monotonic() + 60
        while not port.read_text().strip():
            assert procs[-1].poll() is None and time.monotonic() < deadline, "no server"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port.read_text().strip()}"
        return base + "/mcp", base + "/stats"

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=20)


def test_the_mcp_server_answers_searches_over_loopback(corpus_server):
    url, stats_url = corpus_server(0.0)
    chain = make_rows(20, 1)[3]["rollout_extra"]["chain"]

    async def go():
        async with McpSearch(url) as search:
            return await asyncio.gather(*(search.search(e) for e in chain["exprs"])), \
                search.calls

    answers, calls = asyncio.run(go())
    assert [value_of(text) for text, _ in answers] == chain["values"]
    assert calls == chain["hops"] and httpx.get(stats_url).json()["calls"] == chain["hops"]


def test_a_failing_search_is_retried_once_then_read_as_an_error(corpus_server):
    url, stats_url = corpus_server(1.0)

    async def go():
        async with McpSearch(url) as search:
            return await search.search("3 * 4")

    text, calls = asyncio.run(go())
    assert calls == 2 and text.startswith("error:") and "unavailable" in text
    assert httpx.get(stats_url).json()["failures"] == 2
