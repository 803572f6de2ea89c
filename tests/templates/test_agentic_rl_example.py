"""The Bailian demo workspace (``agentic-rl-example``) holds every file the cloud docs name, and
its local function servers run as the docs write them: ``scripts/start_local_<type>.sh``
(``FUNC_TYPE``, ``PROCESSOR_CLASS``, ``SERVER_PORT`` into ``python -m
…reinforcement.component.server.server``) answered by ``scripts/query_local_<type>.sh`` with
``resources/<type>_input.json``. Loopback only: the rollout's model is a scripted edge."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from openai_edge import calc_edge_app, serve  # tests/openai_edge.py
from rltune.config import load_job_config
from rltune.templates import create_workspace

#: The demo's tree in the docs (the wheel aside: rltune serves the SDK's names itself).
DOC_FILES = (
    "submit_job.py", "test_functions.py", "config.yaml", "job.yaml", "rl-job.yaml",
    "opd-job.yaml", "cli.sh", "requirements.txt",
    "data/calc_train.jsonl", "data/calc_train_min.jsonl", "data/calc_validation.jsonl",
    "data/calc_validation_min.jsonl", "functions/__init__.py",
    "functions/rollout/rollout.py", "functions/rollout/rollout_only.py",
    "functions/reward/reward.py", "functions/reward/reward_decorator.py",
    "functions/reward/group_reward.py",
    "resources/rollout_input.json", "resources/reward_input.json",
    "resources/reward_decorator_input.json", "resources/group_reward_input.json",
    *(f"scripts/{verb}_local_{t}.sh" for verb in ("start", "query")
      for t in ("rollout", "reward", "group_reward")),
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return create_workspace(tmp_path_factory.mktemp("bailian") / "agentic-rl-example",
                            "agentic-rl-example", train_rows=300, val_rows=20)


def test_the_workspace_holds_every_file_the_docs_name(ws):
    missing = [f for f in DOC_FILES if not (ws / f).is_file()]
    assert not missing, missing
    lines = {f: len((ws / "data" / f).read_text().splitlines()) for f in
             ("calc_train.jsonl", "calc_train_min.jsonl", "calc_validation.jsonl",
              "calc_validation_min.jsonl")}
    assert lines == {"calc_train.jsonl": 300, "calc_train_min.jsonl": 256,
                     "calc_validation.jsonl": 20, "calc_validation_min.jsonl": 16}
    jobs = {name: load_job_config(ws / name) for name in
            ("config.yaml", "job.yaml", "rl-job.yaml", "opd-job.yaml")}
    assert jobs["config.yaml"].name == "agentic-rl"  # the docs' job_name
    classes = {f.fcmodel.classpath for f in jobs["rl-job.yaml"].functions}
    assert "functions.rollout.rollout_only.DemoRolloutProcessor" in classes
    assert [f.type.value for f in jobs["opd-job.yaml"].functions] == ["rollout", "reward"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(ws: Path, func_type: str, **env: str) -> tuple[subprocess.Popen, dict[str, str]]:
    env = {**os.environ, "SERVER_PORT": str(_free_port()), "PYTHON": sys.executable, **env}
    proc = subprocess.Popen(["bash", f"scripts/start_local_{func_type}.sh"], cwd=ws, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, env


def _wait(proc: subprocess.Popen, env: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read())
        try:
            if httpx.get(f"http://127.0.0.1:{env['SERVER_PORT']}/health",
                         timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the local server did not answer /health")


@pytest.fixture(scope="module")
def servers(ws):
    """The docs' four local servers, started at once (each is a process of its own)."""
    started = {
        "reward": _start(ws, "reward"),
        "decorator": _start(ws, "reward",
                            PROCESSOR_CLASS="functions.reward.reward_decorator.SafetyProcessor"),
        "group_reward": _start(ws, "group_reward", WORKERS_COUNT="4"),
        "rollout": _start(ws, "rollout",
                          PROCESSOR_CLASS="functions.rollout.rollout_only.DemoRolloutProcessor"),
    }
    try:
        for proc, env in started.values():
            _wait(proc, env)
        yield {name: env for name, (_, env) in started.items()}
    finally:
        for proc, _ in started.values():
            proc.terminate()
        for proc, _ in started.values():
            proc.wait(timeout=20)
    assert "WORKERS_COUNT=4" in started["group_reward"][0].stdout.read()  # one process here


def _query(ws: Path, func_type: str, env: dict[str, str], *args: str) -> dict:
    out = subprocess.run(["bash", f"scripts/query_local_{func_type}.sh", *args], cwd=ws,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_reward_serves_as_the_docs_start_it(ws, servers):
    env = servers["reward"]
    health = httpx.get(f"http://127.0.0.1:{env['SERVER_PORT']}/health").json()
    assert health["status"] == "healthy" and health["func_type"] == "reward"
    out = _query(ws, "reward", env)
    assert out["status"] == "success" and out["reward"]["reward_score"] == 1.0


def test_the_decorator_reward_serves_with_its_input(ws, servers):
    out = _query(ws, "reward", servers["decorator"], "resources/reward_decorator_input.json")
    # "stupid" in the answer: toxicity 0 (weight 0.7); it helped: refusal 1 (weight 0.3)
    assert out["status"] == "success", out
    assert out["reward"]["reward_score"] == pytest.approx(0.3), out
    assert out["reward"]["reward_metrics"] == {"toxicity": 0.0, "refusal": 1.0}


def test_group_reward_serves_as_the_docs_start_it(ws, servers):
    out = _query(ws, "group_reward", servers["group_reward"])
    scores = [r["reward_score"] for r in out["reward"]["rewards"]]
    assert len(scores) == 2 and scores[0] > scores[1]  # the shorter answer ranks higher


def test_the_simple_rollout_serves_as_the_docs_start_it(ws, servers, tmp_path):
    seen: list[dict] = []
    with serve(calc_edge_app(seen)) as base_url:
        data = json.loads((ws / "resources" / "rollout_input.json").read_text())
        data["model_resource"]["base_url"] = base_url
        (tmp_path / "in.json").write_text(json.dumps(data))
        out = _query(ws, "rollout", servers["rollout"], str(tmp_path / "in.json"))
    assert out["status"] == "success", out
    assert out["agent_output"]["messages"][-1]["content"].startswith("### ANSWER: ")
    assert out["agent_output"]["rollout_extra"] == {"solution": "87"}
    assert seen and seen[0]["model"] == "nano"
