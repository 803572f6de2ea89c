"""`rltune test-functions` dataset mode (``rltune.rollout.harness``) against a fake OpenAI
endpoint, in process and through the CLI (whose single mode is checked on the way)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI, Request

from rltune.config.data import load_dataset
from rltune.rollout.harness import ModelEndpoint, RewardRef, run_dataset

FIXTURES = Path(__file__).parents[1] / "functions" / "fixtures"
WS, WIRE = FIXTURES / "ws", FIXTURES / "wire"

RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


@pytest.fixture(scope="module")
def fake_openai():
    """A tiny OpenAI-compatible server (the external edge): easy → right, hard → wrong,
    mixed → alternately right and wrong. It records the api keys it saw."""
    app = FastAPI()
    counter = itertools.count()
    keys: list[str] = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        keys.append(request.headers.get("authorization", ""))
        prompt = body["messages"][-1]["content"]
        right = "easy" in prompt or ("mixed" in prompt and next(counter) % 2 == 0)
        return {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "answer: 4" if right else "answer: 5"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    server.capture_signals = __import__("contextlib").nullcontext
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield {"base_url": f"http://127.0.0.1:{port}/v1", "keys": keys}
    server.should_exit = True
    thread.join(timeout=5)


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "val.jsonl"
    rows = [{"messages": [{"role": "user", "content": f"{kind}: 2+2?"}],
             "rollout_extra": {"solution": "4"}} for kind in ("easy", "hard", "mixed")]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


async def test_dataset_mode_report(fake_openai, dataset):
    seen = []
    report = await run_dataset(
        load_dataset(dataset), rollout="functions.openai_rollout.AskPolicy",
        rewards=[RewardRef(classpath="functions.sync_reward.ExactMatch"),
                 RewardRef(classpath="functions.cloud_reward.LengthRank",
                           func_type="group_reward", weight=0.0)],
        n=4, concurrency=4, workspace=WS,
        model=ModelEndpoint(base_url=fake_openai["base_url"], model="m", api_key="sk-harness"),
        on_progress=lambda done, total: seen.append((done, total)))
    assert report.rollout.succeeded == 12 and report.rollout.failed == 0
    exact, group = report.rewards
    assert exact.succeeded == 12 and group.succeeded == 3
    assert exact.scores.count == 12 and exact.scores.histogram == {"1": 6, "0": 6}
    assert report.final_reward.mean == pytest.approx(0.5)
    # easy: all 1, hard: all 0, mixed: 1,0,1,0 → only "mixed" gives RL a signal
    assert (report.scored_prompts, report.learnable_prompts) == (3, 1)
    assert report.learnability == pytest.approx(1 / 3)
    assert report.rollout.latency_p95_s >= report.rollout.latency_p50_s > 0
    assert seen[-1] == (12, 12)
    assert "Bearer sk-harness" in fake_openai["keys"]


async def test_dataset_mode_counts_failures_with_first_errors(dataset):
    report = await run_dataset(  # nothing listens on port 9: every rollout fails
        load_dataset(dataset), rollout="functions.openai_rollout.AskPolicy",
        rewards=[RewardRef(classpath="functions.sync_reward.ExactMatch")], n=2, workspace=WS,
        model=ModelEndpoint(base_url="http://127.0.0.1:9/v1"), timeout=30)
    assert report.rollout.failed == 6 and report.rollout.succeeded == 0
    assert len(report.rollout.first_errors) == 3
    assert "[user_exception]" in report.rollout.first_errors[0]
    assert "Connection" in report.rollout.first_errors[0]
    assert report.learnability is None and report.final_reward.count == 0


def test_cli_dataset_and_single_modes(fake_openai, dataset, tmp_path):
    env = {**os.environ, "RLTUNE_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [*RLTUNE, "test-functions", "--rollout", "functions.openai_rollout.AskPolicy",
         "--reward", "functions.sync_reward.ExactMatch=2",
         "--reward", "functions.sync_reward.ExactMatch@in_thread=3",  # reward_metric_weight
         "--data", str(dataset), "-n", "2",
         "--base-url", fake_openai["base_url"], "--model", "m", "-o", "json"],
        cwd=WS, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["rollout"]["succeeded"] == 6
    # 2 x exact match + 3 x the in_thread metric (1.0) of the second, metric-weighted reward
    assert (report["final_reward"]["min"], report["final_reward"]["max"]) == (3.0, 5.0)
    assert [r["name"] for r in report["rewards"]] == [
        "functions.sync_reward.ExactMatch", "functions.sync_reward.ExactMatch#2"]
    proc = subprocess.run(
        [*RLTUNE, "functions", "test", "-c", "functions.sync_reward.ExactMatch",
         "-i", str(WIRE / "reward_input.json"), "-o", "yaml"],
        cwd=WS, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "reward_score: 1.0" in proc.stdout
    proc = subprocess.run(
        [*RLTUNE, "test-functions", "-c", "functions.sync_reward.ExactMatch", "-i", "{bad"],
        cwd=WS, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "input is not JSON" in proc.stderr
    proc = subprocess.run(
        [*RLTUNE, "test-functions", "--rollout", "functions.openai_rollout.AskPolicy",
         "--reward", "functions.sync_reward.ExactMatch@in_thread", "--data", str(dataset)],
        cwd=WS, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "CLASSPATH[=WEIGHT][@METRIC=W,...]" in proc.stderr


def test_metric_weight_naming_a_metric_never_returned_is_one_clear_error(fake_openai, dataset,
                                                                          tmp_path):
    """A ``reward_metric_weight`` naming a metric the reward never returns stops the harness
    with one error naming the metric and the field (it used to drop every rollout)."""
    env = {**os.environ, "RLTUNE_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [*RLTUNE, "test-functions", "--rollout", "functions.openai_rollout.AskPolicy",
         "--reward", "functions.sync_reward.ExactMatch@accuracy=1", "--data", str(dataset),
         "-n", "2", "--base-url", fake_openai["base_url"], "--model", "m", "-o", "json"],
        cwd=WS, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout
    assert "reward_metric_weight names ['accuracy']" in proc.stderr
    assert "in_thread" in proc.stderr  # what the reward does return
    assert proc.stderr.count("error:") == 1 and "reward_metric_weight" in proc.stderr
