"""The `search-mcp` template: init → test-functions → a short training job. The rollout's
tool is a real MCP server (mcp_server.py, built with the `mcp` package) over the bundled
corpus, reached through the MCP client inside the rollout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from test_rl_demo_template import RLTUNE, _env

pytest.importorskip("mcp")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("search") / "search-mcp"
    res = subprocess.run([*RLTUNE, "init", "workspace", str(ws), "--template", "search-mcp",
                          "--train-rows", "4", "--val-rows", "2"],
                         env=_env(ws.parent), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return ws


def test_the_mcp_server_serves_the_corpus(workspace, tmp_path):
    """The rollout's own MCP client code against the template's server."""
    code = (
        "import asyncio, sys\n"
        "sys.path.insert(0, '.')\n"
        "from functions.rollout import SearchRollout\n"
        "async def main():\n"
        "    r = SearchRollout(); await r.setup()\n"
        "    print([t['function']['name'] for t in r.tools])\n"
        "    print(await r.call_tool('search', '{\"query\": \"Lumen Bridge city\"}'))\n"
        "    print(await r.call_tool('search', 'not json'))\n"
        "    r._stop.set(); await r._task\n"
        "asyncio.run(main())\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=workspace, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    names, hit, bad = res.stdout.splitlines()[:3]
    assert names == "['search']"
    assert hit.startswith("[lumen-bridge]") and "Porto" in hit
    assert bad.startswith("error:")


@pytest.mark.slow  # ~40 s on a busy 2-core box: a worker per function plus the MCP server
def test_test_functions_runs_the_search_agent(workspace, nano_endpoint, tmp_path):
    res = subprocess.run(
        [*RLTUNE, "test-functions", "--rollout", "functions/rollout.py:SearchRollout",
         "--reward", "functions/reward.py:SearchReward", "--data", "data/val.jsonl", "-n", "2",
         "--max-tokens", "48", "--base-url", nano_endpoint["base_url"],
         "--api-key", nano_endpoint["api_key"], "--model", nano_endpoint["model"],
         "-o", "json"],
        cwd=workspace, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["rollout"]["succeeded"] == 4 and report["final_reward"]["count"] == 4, report


@pytest.mark.slow  # about a minute on a busy 2-core box
def test_a_short_search_job_finishes(workspace, nano_model_dir, tmp_path):
    job = yaml.safe_load((workspace / "job.yaml").read_text())
    job["model"]["name"] = str(nano_model_dir)
    job["training"]["hyper_parameters"].update(batch_size=2, n_rollouts=2, n_epochs=1,
                                                eval_steps=1)
    cfg = workspace / "job-short.yaml"
    cfg.write_text(yaml.safe_dump(job))
    out = tmp_path / "out"
    res = subprocess.run([*RLTUNE, "train", "-c", str(cfg), "-O", str(out), "--quiet"],
                         cwd=workspace, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr + res.stdout
    assert '"steps": 2' in res.stdout
    step = json.loads((out / "metrics.jsonl").read_text().splitlines()[1])["metrics"]
    assert step["trace/success_rate/agent"] == 1.0 and step["trace/success_rate/reward"] == 1.0
    assert (out / "checkpoints").is_dir()
