"""Ark's online plugin test as the docs run it: the template's ``test_faas.py`` under
``python -m rltune.ark``, its plugins registered with a real server and called in the server's
function workers (``ark_sdk.resources.pipeline_plugin.test_instance``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from openai_edge import calc_edge_app, serve  # tests/openai_edge.py

ARK = [sys.executable, "-m", "rltune.ark"]


def test_test_faas_runs_the_plugins_on_the_server(server, tmp_path):
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url,
           "LOCAL_TEST_MODEL": "model-under-test", "ARK_API_KEY": "ark-key-123"}
    env.pop("RLTUNE_API_KEY", None)
    ws = tmp_path / "ws"
    res = subprocess.run([*ARK, "init", "workspace", str(ws), "--template", "rl_demo"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    seen: list[dict] = []
    with serve(calc_edge_app(seen)) as base_url:
        env["ARK_BASE_URL"] = base_url
        runs = [subprocess.run([*ARK, "test_faas.py"], cwd=ws, env=env, capture_output=True,
                               text=True, timeout=300) for _ in range(2)]
    for res in runs:
        assert res.returncode == 0, res.stderr
        out = {line.split(":", 1)[0]: json.loads(line.split(":", 1)[1])
               for line in res.stdout.splitlines() if ": {" in line}
        assert out["rollout"]["status"] == "success", res.stdout
        answer = out["rollout"]["trajectory"]["messages"][-1]["content"]
        assert answer.startswith("### ANSWER:")
        assert out["exact_grader"]["rewards"] == [1.0]
        assert out["answered_grader"]["kind"] == "group_grader"
        assert out["answered_grader"]["metrics"] == {"answered": 1.0}
    assert [s["model"] for s in seen] == ["model-under-test"] * 2
    assert {s["auth"] for s in seen} == {"Bearer ark-key-123"}
    head = {"Authorization": f"Bearer {server.key}"}
    functions = httpx.get(f"{server.url}/v1/functions", headers=head).json()
    assert functions["total"] == 3  # the second run reused what the first registered
    instances = httpx.get(f"{server.url}/v1/instances", headers=head).json()["items"]
    assert [i for i in instances if i["status"] == "active"] == []  # stopped at the end


def test_the_ark_path_and_a_request_without_a_proxy(server, monkeypatch):
    from rltune.ark import install_as_ark_sdk
    from rltune.sdk.errors import UserCodeError
    from rltune.templates import TEMPLATES_DIR

    monkeypatch.setenv("RLTUNE_BASE_URL", server.url)
    install_as_ark_sdk()
    from ark_sdk.resources.pipeline_plugin.test_instance import (
        get_or_create_pipeline_plugin_test_instance,
    )

    _forget_plugins()  # another test's ``plugins`` package (a workspace of its own) may be loaded
    monkeypatch.syspath_prepend(str(TEMPLATES_DIR / "rl_demo"))
    from plugins.exact_grader import exact_grader

    instance = get_or_create_pipeline_plugin_test_instance(exact_grader)
    try:
        assert instance.classpath == "plugins.exact_grader:exact_grader"
        with pytest.raises(UserCodeError, match="no 'sample'"):
            instance.request({"trajectory": {}})
        sample = {"messages": [{"role": "user", "content": "1+1"}], "extra": {"answer": "2"}}
        graded = instance.request({"sample": sample, "trajectory": {"messages": [
            {"role": "assistant", "content": "### ANSWER: 3 ###"}]}})
        assert (graded["status"], graded["rewards"]) == ("success", [0.0])
    finally:
        instance.stop()
        _forget_plugins()  # the template's package: not left for other tests


def _forget_plugins() -> None:
    for name in [n for n in sys.modules if n == "plugins" or n.startswith("plugins.")]:
        del sys.modules[name]


def test_search_demo_test_faas_starts_its_mcp_server_in_the_worker(server, tmp_path):
    """The search rollout's MCP server (``mcp_server.py`` over ``corpus/corpus.jsonl``) runs
    from the registered archive, which leaves ``data/`` out."""
    pytest.importorskip("mcp")
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url}
    env.pop("RLTUNE_API_KEY", None)
    ws = tmp_path / "ws"
    res = subprocess.run([*ARK, "init", "workspace", str(ws), "--template",
                          "rl_search_mcp_demo"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    with serve(calc_edge_app([])) as base_url:
        res = subprocess.run([*ARK, "test_faas.py"], cwd=ws, capture_output=True, text=True,
                             env={**env, "ARK_BASE_URL": base_url}, timeout=300)
    assert res.returncode == 0, res.stderr
    out = {line.split(":", 1)[0]: json.loads(line.split(":", 1)[1])
           for line in res.stdout.splitlines() if ": {" in line}
    assert out["rollout"]["status"] == "success", out["rollout"]["error"][-2000:]
    assert out["rollout"]["trajectory"]["extra"] == {"searches": 0}
    assert out["contains_answer"]["status"] == "success"
