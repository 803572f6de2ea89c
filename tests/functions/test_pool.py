"""FunctionPool against real worker processes: calls, failures, limits, chaos and autoscaling."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from conftest import WS, rollout_input
from rltune.functions import FunctionComponentSpec, FunctionPool
from rltune.functions.backends.local import LocalProcessBackend
from rltune.functions.failures import PoolBroken
from rltune.functions.pool import MEMORY_KILLS_IN_A_ROW
from rltune.sdk import RewardInput, TaskStatus
from rltune.sdk.errors import UserCodeError, ValidationError


def spec(classpath="functions.behave.Behave", func_type="rollout", **kw):
    return FunctionComponentSpec(classpath=classpath, func_type=func_type, workspace=WS, **kw)


async def start(tmp_path, s, **kw):
    return await FunctionPool.start(s, LocalProcessBackend(tmp_path / "logs"), **kw)


async def wait_until(pred, timeout=10.0, pool=None):
    deadline = time.monotonic() + timeout
    while not pred():
        state = pool.metrics().model_dump() if pool else ""
        assert time.monotonic() < deadline, f"condition not reached in time {state}"
        await asyncio.sleep(0.05)


async def test_call_models_dicts_and_metrics(tmp_path):
    async with await start(tmp_path, spec("functions.sync_reward.ExactMatch", "reward")) as pool:
        inp = RewardInput(ground_truth="5", agent_output={"messages": [
            {"role": "assistant", "content": "= 5"}]})
        assert (await pool.call(inp)).reward.reward_score == 1.0
        out = await pool.call({"ground_truth": "6", "agent_output": {"messages": [
            {"role": "assistant", "content": "= 5"}]}})
        assert out.reward.reward_score == 0.0 and out.status == TaskStatus.SUCCESS
        with pytest.raises(ValidationError, match="input does not fit RewardInput"):
            await pool.call({"agent_output": "nope"})
        m = pool.metrics()
        assert (m.workers, m.calls, m.succeeded, m.failures) == (1, 2, 2, 0)
        assert m.latency_p50_s is not None and m.worker_details[0].rss_mb > 10


async def test_user_exception_is_an_explicit_failure(tmp_path):
    async with await start(tmp_path, spec()) as pool:
        out = await pool.call(rollout_input(**{"raise": "tool exploded"}))
        assert out.status == TaskStatus.FAILED and out.error_code == "user_exception"
        assert "RuntimeError: tool exploded" in out.error
        assert pool.metrics().failures == 1 and pool.metrics().restarts == 0


async def test_non_finite_output_is_an_explicit_failure(tmp_path):
    async with await start(tmp_path, spec()) as pool:
        out = await pool.call(rollout_input(nan=True))
        assert out.status == TaskStatus.FAILED and out.error_code == "invalid_output"
        assert "non-finite number at agent_output.reward_score (nan)" in out.error


async def test_env_and_cpu_reach_the_worker(tmp_path):
    s = spec(runtime={"env": {"RLTUNE_TEST_ENV": True}, "cpu": 1.5})
    async with await start(tmp_path, s) as pool:
        extra = (await pool.call(rollout_input())).agent_output.rollout_extra
        assert extra["env"] == "true" and extra["threads"] == "2"


@pytest.mark.parametrize("how", ["sleep", "block"])
async def test_call_past_timeout_fails_within_timeout_plus_1s(tmp_path, how):
    # "sleep" awaits (the worker answers 504); "block" freezes the worker's loop (it hangs and
    # the pool kills and replaces it).
    async with await start(tmp_path, spec(timeout=1.0)) as pool:
        t0 = time.monotonic()
        out = await pool.call(rollout_input(**{how: 10}))
        elapsed = time.monotonic() - t0
        assert out.status == TaskStatus.FAILED and out.error_code == "timeout", out.error
        assert elapsed < 2.0
        if how == "block":
            assert "hung" in out.error
            await wait_until(lambda: pool.metrics().workers == 1)
            assert pool.metrics().restarts == 1
        assert (await pool.call(rollout_input())).status == TaskStatus.SUCCESS


async def test_memory_limit_kills_and_reports(tmp_path):
    s = spec(runtime={"memory_size": 160, "memory_scale_threshold": 1.0}, max_retries=0)
    async with await start(tmp_path, s, scale_interval=0.05) as pool:
        out = await asyncio.wait_for(pool.call(rollout_input(alloc_mb=300, hold=20)), 15)
        assert out.status == TaskStatus.FAILED and out.error_code == "memory_exceeded"
        assert "exceeded memory_size 160 MB" in out.error
        await wait_until(lambda: pool.metrics().workers == 1, pool=pool)
        assert pool.metrics().restarts == 1
        assert (await pool.call(rollout_input())).status == TaskStatus.SUCCESS


async def test_memory_size_below_the_baseline_fails_fast(tmp_path):
    """A cloud sample's ``memory_size: 4``: every worker is over it right after setup. The pool
    gives up after MEMORY_KILLS_IN_A_ROW kills (not hundreds) and every call, waiting or new,
    raises PoolBroken naming runtime.memory_size and the measured baseline."""
    s = spec("functions.trivial.Trivial", "reward", runtime={"memory_size": 4})
    async with await start(tmp_path, s, scale_interval=0.05) as pool:
        await wait_until(lambda: pool.broken is not None, timeout=60, pool=pool)
        with pytest.raises(PoolBroken) as err:
            await asyncio.wait_for(pool.call({"agent_output": {"messages": []}}), 10)
        msg = err.value.message
        assert "runtime.memory_size 4 MB" in msg and "measured baseline after setup" in msg
        assert "no call in flight" in msg
        assert "runtime.memory_size" in err.value.where and "at least" in err.value.hint
        await asyncio.sleep(1.0)  # a start already under way may end; nothing new starts
        m = pool.metrics()
        assert m.restarts <= 2 * MEMORY_KILLS_IN_A_ROW and m.starting == 0, m
        await asyncio.sleep(1.0)
        assert pool.metrics().restarts == m.restarts and pool.metrics().workers == 0


async def test_crashing_worker_is_retried_then_failed(tmp_path):
    async with await start(tmp_path, spec(max_retries=1)) as pool:
        out = await asyncio.wait_for(pool.call(rollout_input(exit=7)), 30)
        assert out.status == TaskStatus.FAILED and out.error_code == "worker_crashed"
        assert "exited with code 7" in out.error and "after 2 attempts" in out.error
        assert "fatal: exiting with 7" in out.error  # the worker's own last words
        assert pool.metrics().retries == 1
        await wait_until(lambda: pool.metrics().workers == 1)
        assert (await pool.call(rollout_input())).status == TaskStatus.SUCCESS


async def test_hung_worker_without_timeout_is_replaced(tmp_path):
    # No call timeout: the /health probe finds the frozen event loop.
    s = spec(max_retries=0, hang_timeout=1.0, health_interval=0.2)
    async with await start(tmp_path, s, scale_interval=0.05) as pool:
        t0 = time.monotonic()
        out = await asyncio.wait_for(pool.call(rollout_input(block=30)), 10)
        assert out.status == TaskStatus.FAILED and out.error_code == "worker_hung"
        assert "/health unanswered for 1.0 s" in out.error
        assert time.monotonic() - t0 < 4
        await wait_until(lambda: pool.metrics().workers == 1, pool=pool)
        assert (await pool.call(rollout_input())).status == TaskStatus.SUCCESS


async def test_setup_failure_fails_start(tmp_path):
    with pytest.raises(UserCodeError, match="setup\\(\\) raised RuntimeError"):
        await start(tmp_path, spec("functions.bad_setup.BadSetup", "reward"))


async def test_chaos_kill9_under_load(tmp_path):
    s = spec(runtime={"capacity": 2, "min_capacity": 2, "max_capacity": 3, "concurrency": 8},
             scale_in_cooldown=0.5, max_retries=3)
    async with await start(tmp_path, s) as pool:
        victim = pool.workers[0].handle.pid

        async def killer():
            await asyncio.sleep(0.5)
            os.kill(victim, signal.SIGKILL)

        calls = [pool.call(rollout_input(str(i), sleep=0.05)) for i in range(300)]
        results, _ = await asyncio.wait_for(
            asyncio.gather(asyncio.gather(*calls), killer()), timeout=90)
        assert len(results) == 300  # none lost, none hanging
        for i, out in enumerate(results):
            if out.status == TaskStatus.SUCCESS:
                assert out.agent_output.messages[-1]["content"] == f"echo {i}"
            else:
                assert out.error_code == "worker_crashed" and out.error
        ok = sum(r.status == TaskStatus.SUCCESS for r in results)
        assert ok >= 290, f"only {ok} of 300 succeeded"
        m = pool.metrics()
        assert m.restarts >= 1 and victim not in [w.pid for w in m.worker_details]
        await wait_until(lambda: pool.metrics().workers == 2 and not pool.starting, timeout=20)


async def test_scale_out_and_in_under_a_burst(tmp_path):
    s = spec(runtime={"capacity": 1, "min_capacity": 1, "max_capacity": 3, "concurrency": 2,
                      "concurrency_scale_threshold": 0.5}, scale_in_cooldown=0.5)
    async with await start(tmp_path, s, scale_interval=0.05) as pool:
        seen = []

        async def watch():
            while True:
                seen.append(pool.metrics().workers)
                await asyncio.sleep(0.05)

        watcher = asyncio.ensure_future(watch())
        outs = await asyncio.gather(*(pool.call(rollout_input(sleep=1.0)) for _ in range(12)))
        assert all(o.status == TaskStatus.SUCCESS for o in outs)
        assert max(seen) >= 2 and pool.metrics().scale_outs >= 1
        await wait_until(lambda: pool.metrics().workers == 1, timeout=15)
        watcher.cancel()
        m = pool.metrics()
        assert m.scale_ins >= 1 and m.workers == 1


@pytest.mark.parametrize("isolation", ["auto", "none"])
async def test_a_worker_past_the_process_limit_is_killed_with_its_processes(tmp_path,
                                                                             monkeypatch,
                                                                             isolation):
    """A fork bomb's shape: the worker starts 40 processes against a limit of 20. It is
    killed with processes_exceeded (naming the setting) and none of its processes lives on
    (under bubblewrap its PID namespace ends; without, the pool kills them)."""
    import psutil

    monkeypatch.setenv("RLTUNE_WORKER_MAX_PROCESSES", "20")
    monkeypatch.setenv("RLTUNE_FUNCTION_ISOLATION", isolation)
    marker = f"{60 + os.getpid() % 1000 / 1000:.3f}"  # this test's sleeps: sleep 60.xyz

    def sleeps():
        return [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] == ["sleep", marker]]

    s = spec(max_retries=0)
    async with await start(tmp_path, s, scale_interval=0.05) as pool:
        call = asyncio.ensure_future(pool.call(rollout_input(spawn=40, spawn_s=marker,
                                                             hold=30)))
        await wait_until(lambda: len(sleeps()) >= 20 or call.done(), pool=pool)
        out = await asyncio.wait_for(call, 20)
        assert out.status == TaskStatus.FAILED and out.error_code == "processes_exceeded", out
        assert "more than the limit of 20" in out.error
        assert "RLTUNE_WORKER_MAX_PROCESSES" in out.error
        await wait_until(lambda: not sleeps(), pool=pool)
        await wait_until(lambda: pool.metrics().workers == 1, pool=pool)
        assert (await pool.call(rollout_input())).status == TaskStatus.SUCCESS


def test_a_bad_process_limit_is_refused_by_name(monkeypatch):
    from rltune.functions.spec import max_processes

    monkeypatch.setenv("RLTUNE_WORKER_MAX_PROCESSES", "many")
    with pytest.raises(ValidationError) as err:
        max_processes()
    assert err.value.where == "RLTUNE_WORKER_MAX_PROCESSES"


async def test_a_sandboxed_workers_home_is_capped_at_disk_size(tmp_path):
    """/worker (HOME) is a tmpfs of runtime.disk_size MB: writing past it fails with
    "No space left on device" inside the function, and the pool still reads the worker's
    ready line (it no longer lives in that folder)."""
    from rltune.functions.sandbox import active_isolation, bwrap_problem

    if active_isolation() != "bwrap":
        pytest.skip(f"no sandbox here: {bwrap_problem()}")
    s = spec(runtime={"disk_size": 8})
    async with await start(tmp_path, s) as pool:
        out = await pool.call(rollout_input(write_mb=20))
        assert out.status == TaskStatus.SUCCESS, out.error
        assert "No space left on device" in out.agent_output.rollout_extra["written"]
        out = await pool.call(rollout_input(write_mb=4))
        assert out.agent_output.rollout_extra["written"] == "all"  # rewriting the same file
