"""The worker process over real HTTP: wire examples, error codes, cloud-SDK code, lifecycle."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import httpx
import orjson
import pytest

from conftest import WS, rollout_input, wire, worker_auth
from rltune.functions.auth import HEADER
from rltune.sdk import GroupRewardOutput, RewardOutput, RolloutOutput
from rltune.sdk.errors import UserCodeError


async def test_wire_examples_give_valid_outputs(start_worker):
    ro = await start_worker("functions.behave.Behave", "rollout")
    rw = await start_worker("functions/sync_reward.py:ExactMatch", "reward")
    grw = await start_worker("functions.cloud_reward.LengthRank", "group_reward")
    async with httpx.AsyncClient(auth=worker_auth) as c:
        r = await c.post(ro.url, json=wire("rollout_input"))
        assert r.status_code == 200, r.text
        out = RolloutOutput.model_validate(r.json())
        assert out.status.value == "success"
        last = out.agent_output.messages[-1]
        assert last == {"role": "assistant", "content": "echo What is 2+3?"}
        assert out.agent_output.rollout_extra["api_key"] == "sk-test"  # secret reached user code
        assert out.agent_output.rollout_extra["solution"] == "5"

        r = await c.post(rw.url, json=wire("reward_input"))
        out = RewardOutput.model_validate(r.json())
        assert out.reward.reward_score == 1.0
        assert out.reward.reward_metrics == {"in_thread": 1.0}  # sync process ran in a thread

        r = await c.post(grw.url, json=wire("group_reward_input"))
        out = GroupRewardOutput.model_validate(r.json())
        assert [x.reward_score for x in out.reward.rewards] == [0.0, 1.0]

        health = (await c.get(ro.base_url + "/health")).json()
        assert health["status"] == "healthy" and health["func_type"] == "rollout"
        assert health["processor"] == "Behave" and health["served"] == 1

        # user code that builds its httpx / openai client per rollout does not load the CA
        # store each time: the worker shares one TLS context (functions/sslshare.py)
        r = await c.post(ro.url, json=rollout_input(ssl=True))
        assert RolloutOutput.model_validate(r.json()).agent_output.rollout_extra[
            "ssl_shared"] == [True, True]


async def test_a_worker_answers_only_its_pool(start_worker):
    """Without its secret (none, another worker's, a prefix of it) every route, /health
    included, is a 401 that says nothing of the function; the pool's client gets through."""
    from rltune.functions.http import WorkerHTTPClient

    w = await start_worker("functions/sync_reward.py:ExactMatch", "reward")
    other = await start_worker("functions/sync_reward.py:ExactMatch", "reward")
    assert w.token and other.token and w.token != other.token
    async with httpx.AsyncClient() as c:
        for headers in ({}, {HEADER: other.token}, {HEADER: w.token[:-1]}, {HEADER: ""},
                        {"Authorization": f"Bearer {w.token}"}):
            r = await c.post(w.url, json=wire("reward_input"), headers=headers)
            assert r.status_code == 401, (headers, r.text)
            assert "reward" not in r.text and "ExactMatch" not in r.text
            h = await c.get(w.base_url + "/health", headers=headers)
            assert h.status_code == 401 and "ExactMatch" not in h.text
    client = WorkerHTTPClient("127.0.0.1", httpx.URL(w.base_url).port,
                              headers={HEADER: w.token})
    try:
        status, body = await client.post("/api/v1", orjson.dumps(wire("reward_input")))
    finally:
        client.close()
    assert status == 200 and orjson.loads(body)["reward"]["reward_score"] == 1.0


async def test_unmodified_cloud_sdk_processor_runs(start_worker):
    w = await start_worker("functions.cloud_reward.CalcReward", "reward")
    async with httpx.AsyncClient(auth=worker_auth) as c:
        body = wire("reward_input")
        r = await c.post(w.url, json=body)
        assert r.status_code == 200, r.text
        assert r.json()["reward"]["reward_score"] == pytest.approx(1.0)  # 0.8·1 + 0.2·1
        body["ground_truth"] = "7"
        assert (await c.post(w.url, json=body)).json()["reward"]["reward_score"] == (
            pytest.approx(0.2))


async def test_error_codes(start_worker):
    w = await start_worker("functions.behave.Behave", "rollout", timeout=0.5)
    async with httpx.AsyncClient(auth=worker_auth) as c:
        r = await c.post(w.url, content=b"{not json")
        assert r.status_code == 400 and r.json()["detail"].startswith("Invalid JSON body")
        r = await c.post(w.url, json={"messages": []})  # model_resource missing
        assert r.status_code == 422 and "model_resource" in r.json()["detail"]
        r = await c.post(w.url, json={**rollout_input(), "func_type": "reward"})
        assert r.status_code == 422 and "func_type 'reward'" in r.json()["detail"]
        r = await c.post(w.url, json=rollout_input(**{"raise": "boom"}))
        assert r.status_code == 500 and r.json()["message"] == "boom"
        assert r.json()["error_type"] == "RuntimeError"
        t0 = time.monotonic()
        r = await c.post(w.url, json=rollout_input(sleep=5))
        assert r.status_code == 504 and "timeout of 0.5 s" in r.json()["message"]
        assert time.monotonic() - t0 < 1.5
        r = await c.post(w.url, json=rollout_input(fail=True))  # FAILED is a normal answer
        assert r.status_code == 200 and r.json()["status"] == "failed"


async def test_503_beyond_concurrency_and_queue(start_worker):
    w = await start_worker("functions.behave.Behave", "rollout",
                           runtime={"concurrency": 1}, queue_size=1)
    async with httpx.AsyncClient(timeout=10, auth=worker_auth) as c:
        slow = [asyncio.ensure_future(c.post(w.url, json=rollout_input(sleep=1.0)))
                for _ in range(2)]
        await asyncio.sleep(0.4)  # one runs, one waits in the queue
        r = await c.post(w.url, json=rollout_input())
        assert r.status_code == 503 and "worker busy" in r.json()["message"]
        assert [x.status_code for x in await asyncio.gather(*slow)] == [200, 200]


async def test_client_disconnect_cancels_the_call(start_worker):
    w = await start_worker("functions.behave.Behave", "rollout")
    async with httpx.AsyncClient(auth=worker_auth) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.post(w.url, json=rollout_input(sleep=30), timeout=0.5)
        deadline = time.monotonic() + 3
        while (await c.get(w.base_url + "/health")).json()["in_flight"] and (
            time.monotonic() < deadline
        ):
            await asyncio.sleep(0.05)
        assert (await c.get(w.base_url + "/health")).json()["in_flight"] == 0


async def test_traceparent_is_the_parent_context(start_worker):
    w = await start_worker("functions.behave.Behave", "rollout")
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    async with httpx.AsyncClient(auth=worker_auth) as c:
        r = await c.post(w.url, json=rollout_input(trace=True),
                         headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    assert r.json()["agent_output"]["rollout_extra"]["trace_id"] == trace_id


async def test_setup_error_is_clear(start_worker):
    with pytest.raises(UserCodeError) as info:
        await start_worker("functions/bad_setup.py:BadSetup", "reward")
    text = str(info.value)
    assert "BadSetup.setup() raised RuntimeError: cannot reach the judge model" in text
    assert "fix setup()" in text


async def test_wrong_type_and_missing_class_are_clear(start_worker):
    with pytest.raises(UserCodeError, match="is a reward processor but the worker serves rollout"):
        await start_worker("functions.sync_reward.ExactMatch", "rollout")
    with pytest.raises(UserCodeError, match="class Nope not found"):
        await start_worker("functions.sync_reward.Nope", "reward")


async def test_missing_requirements_are_reported(start_worker, tmp_path):
    (tmp_path / "requirements.txt").write_text("no-such-pkg-xyz==1.0\n")
    (tmp_path / "uses_pkg.py").write_text(
        "import no_such_pkg_xyz\nfrom rltune.sdk import AbstractRewardProcessor\n"
        "class R(AbstractRewardProcessor):\n    def process(self, x):\n        return None\n")
    with pytest.raises(UserCodeError) as info:
        await start_worker("uses_pkg.py:R", "reward", workspace=tmp_path)
    assert "line 1 'no-such-pkg-xyz==1.0' (not installed)" in str(info.value)
    assert "--build-venv" in str(info.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_configured_by_cloud_env_vars():
    port = _free_port()
    env = {**os.environ, "FUNC_TYPE": "reward", "PROCESSOR_CLASS": "functions.trivial.Trivial",
           "SERVER_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "rltune.functions.worker"], cwd=WS, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async with httpx.AsyncClient(auth=worker_auth) as c:
            for _ in range(200):
                try:
                    r = await c.get(f"http://127.0.0.1:{port}/health")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            assert r.json()["processor"] == "Trivial"
            r = await c.post(f"http://127.0.0.1:{port}/api/v1",
                             json={"agent_output": {"messages": []}})
            assert r.json()["reward"]["reward_score"] == 1.0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_worker_whose_pool_shut_down_while_it_started_exits_quietly(tmp_path):
    """The job ended while a worker started: its folder (and ready file's) is gone. It exits
    0 with one line, no traceback for the finished job's log."""
    gone = tmp_path / "removed" / "ready.json"
    proc = subprocess.run(
        [sys.executable, "-m", "rltune.functions.worker", "--func-type", "reward",
         "--classpath", "functions.trivial.Trivial", "--workspace", str(WS), "--port", "0",
         "--ready-file", str(gone)],
        cwd=WS, capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "FileNotFoundError" not in out, out
    assert "the pool that started this worker has shut down" in out

