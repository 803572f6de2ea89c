"""Ark's local plugin test as the docs run it: the ``__main__`` of a template's rollout file
calls ``plugins/test_utils.py``'s ``test_with_dataset`` (``LOCAL_TEST_MODEL``, ``ARK_API_KEY``,
``max_concurrent`` honoured), under ``python -m rltune.ark``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openai_edge import calc_edge_app, serve  # tests/openai_edge.py

ARK = [sys.executable, "-m", "rltune.ark"]


def _workspace(root: Path, template: str) -> Path:
    env = {**os.environ, "RLTUNE_HOME": str(root / "home")}
    res = subprocess.run([*ARK, "init", "workspace", str(root / template), "--template",
                          template], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return root / template


def _run_main(ws: Path, script: str, base_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLTUNE_HOME": str(ws.parent / "home"), "ARK_BASE_URL": base_url,
           "LOCAL_TEST_MODEL": "model-under-test", "ARK_API_KEY": "ark-key-123"}
    return subprocess.run([*ARK, script], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=300)


def test_rl_demo_rollout_main_runs_the_dataset(tmp_path):
    ws = _workspace(tmp_path, "rl_demo")
    seen: list[dict] = []
    with serve(calc_edge_app(seen)) as base_url:
        res = _run_main(ws, "plugins/calc_rollout.py", base_url)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    rows = [line for line in lines if line.startswith("[")]
    assert len(rows) == 8 and all("success rewards=[1.0]" in r for r in rows), res.stdout
    summary = json.loads(lines[-1])
    assert summary["samples"] == 8 and summary["failed"] == 0
    assert summary["mean_reward"] == 1.0 and summary["max_concurrent"] == 4
    assert summary["model"] == "model-under-test"
    assert len(seen) == 8
    assert {s["model"] for s in seen} == {"model-under-test"}
    assert {s["auth"] for s in seen} == {"Bearer ark-key-123"}
    assert 1 < max(s["in_flight"] for s in seen) <= 4  # concurrent, never above the cap


def test_search_rollout_main_runs_the_dataset(tmp_path):
    pytest.importorskip("mcp")
    ws = _workspace(tmp_path, "rl_search_mcp_demo")
    seen: list[dict] = []
    with serve(calc_edge_app(seen)) as base_url:
        res = _run_main(ws, "plugins/rollout.py", base_url)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["samples"] == 8 and summary["failed"] == 0, res.stdout
    assert {s["model"] for s in seen} == {"model-under-test"}


def test_a_bad_dataset_line_is_named_and_a_group_grader_gets_all(tmp_path):
    ws = _workspace(tmp_path, "rl_demo")
    (ws / "bad.jsonl").write_text('{"messages": [{"role": "user", "content": "What is 1 + 1?"}],'
                                  ' "extra": {"answer": "2"}}\n{"messages": 3}\n')
    (ws / "check.py").write_text(
        "import asyncio, sys\n"
        "from plugins.answered_grader import answered_grader\n"
        "from plugins.calc_rollout import calc_rollout\n"
        "from plugins.test_utils import test_with_dataset\n"
        "out = asyncio.run(test_with_dataset('bad.jsonl', calc_rollout, answered_grader,\n"
        "                  limit=1, max_concurrent=2, n=3))\n"
        "assert out['rollouts'] == 3 and out['rows'][0]['rewards'] == [0.1] * 3, out\n"
        "asyncio.run(test_with_dataset('bad.jsonl', calc_rollout, None, limit=None))\n")
    with serve(calc_edge_app([])) as base_url:
        res = _run_main(ws, "check.py", base_url)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "error: bad.jsonl:2: not an Ark sample" in res.stderr
    assert '"rollouts": 3' in res.stdout
