"""The function pool on a real local Ray cluster (``ray start --head`` + one worker node on
127.0.0.1, 1 CPU each): calls on actors, the runtime knobs, the local error codes, a killed
actor's calls retried, and every resource free again after close.

Slow tier (starting the cluster and the actors' runtime environments takes ~30 s on 2 cores):
``pytest tests/functions/test_ray_backend.py -m slow``.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from conftest import WS, rollout_input
from ray_cluster import LocalRayCluster
from rltune.functions import FunctionComponentSpec, FunctionPool
from rltune.sdk import TaskStatus
from rltune.sdk.errors import ConfigError, UserCodeError

ray = pytest.importorskip("ray")
from rltune import _ray  # noqa: E402
from rltune.functions.backends.ray_backend import RayBackend  # noqa: E402

slow = pytest.mark.slow


def spec(classpath="functions.behave.Behave", func_type="rollout", **kw):
    return FunctionComponentSpec(classpath=classpath, func_type=func_type, workspace=WS, **kw)


async def test_no_address_is_a_clear_config_error(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        pytest.skip("this process is already connected to a cluster")
    with pytest.raises(ConfigError, match="needs the cluster's address") as info:
        await RayBackend().start_worker(spec(), "w1")
    assert info.value.where == "function_backend.address"


@pytest.fixture(scope="module")
def cluster():
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as c:
        _ray.connect(c.address)  # one driver connection for the module's tests
        try:
            deadline = time.monotonic() + 60
            while ray.cluster_resources().get("CPU", 0) < 2:
                assert time.monotonic() < deadline, "the worker node did not join"
                time.sleep(0.2)
            yield c
        finally:
            _ray.disconnect()


def free_cpus() -> float:
    return ray.available_resources().get("CPU", 0.0)


async def wait_until(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


@slow
async def test_calls_run_on_actors_with_the_knobs_and_close_frees_the_cluster(cluster):
    s = spec(runtime={"capacity": 2, "min_capacity": 2, "max_capacity": 2, "cpu": 1,
                      "memory_size": 300, "concurrency": 4, "env": {"RLTUNE_TEST_ENV": 7}})
    pool = await FunctionPool.start(s, RayBackend(cluster.address))
    try:
        nodes = {w.handle.node for w in pool.workers}
        urls = [w.handle.base_url for w in pool.workers]
        # Workers bind the address their node registered (Ray swaps 127.0.0.1 for the host's).
        registered = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
        assert len(urls) == 2 and {u.split("/")[2].split(":")[0] for u in urls} <= registered
        outs = await asyncio.gather(*(pool.call(rollout_input(str(i))) for i in range(20)))
        assert all(o.status == TaskStatus.SUCCESS for o in outs), [o.error for o in outs]
        assert [o.agent_output.messages[-1]["content"] for o in outs] == [
            f"echo {i}" for i in range(20)]
        extra = outs[0].agent_output.rollout_extra
        assert extra["env"] == "7" and extra["threads"] == "1"
        # The workspace came through the runtime environment, not the test's folder.
        assert "runtime_resources" in extra["cwd"] and extra["cwd"] != str(WS)
        assert {o.agent_output.rollout_extra["pid"] for o in outs} <= {
            w.handle.pid for w in pool.workers}
        # cpu 1 each = num_cpus 1 each: both nodes' CPUs are held, and 2 x 300 MB of memory.
        assert free_cpus() == 0.0
        used_mem = (ray.cluster_resources()["memory"]
                    - ray.available_resources().get("memory", 0.0))
        assert used_mem == pytest.approx(2 * 300 * 2**20)
        assert len(nodes) == 2  # one instance per node: each node has 1 CPU
        # max_capacity is capped at what the cluster's CPUs hold (2 CPUs / cpu 1).
        big = spec(runtime={"cpu": 1, "max_capacity": 8, "capacity": 3}).resolved_runtime()
        fitted = pool.backend.fit_runtime(big, "x")
        assert (fitted.capacity, fitted.max_capacity) == (2, 2)
    finally:
        await pool.close()
    await wait_until(lambda: free_cpus() == 2.0)
    # What `ray status` shows (it lags the GCS by a few seconds).
    await wait_until(lambda: "0.0/2.0 CPU" in cluster.status(), 60)


@slow
async def test_failures_keep_the_local_error_codes(cluster):
    s = spec(timeout=2.0, max_retries=1,
             runtime={"capacity": 1, "min_capacity": 1, "max_capacity": 1})
    async with await FunctionPool.start(s, RayBackend(cluster.address)) as pool:
        out = await pool.call(rollout_input(**{"raise": "tool exploded"}))
        assert out.error_code == "user_exception" and "RuntimeError: tool exploded" in out.error
        out = await pool.call(rollout_input(fail=True))
        assert out.status == TaskStatus.FAILED and out.error == "asked to fail"
        t0 = time.monotonic()
        out = await pool.call(rollout_input(sleep=10))
        assert out.error_code == "timeout" and time.monotonic() - t0 < 4, out.error
        out = await asyncio.wait_for(pool.call(rollout_input(exit=7)), 120)
        assert out.status == TaskStatus.FAILED and out.error_code == "worker_crashed"
        assert "exited with code 7" in out.error and "after 2 attempts" in out.error
        assert "fatal: exiting with 7" in out.error  # the worker's last words, from its node
        await wait_until(lambda: len(pool.workers) == 1 and not pool.starting, 90)
        assert (await pool.call(rollout_input())).status == TaskStatus.SUCCESS
    s = spec(runtime={"capacity": 1, "min_capacity": 1, "max_capacity": 1, "memory_size": 160,
                      "memory_scale_threshold": 1.0}, max_retries=0)
    backend = RayBackend(cluster.address)
    async with await FunctionPool.start(s, backend, scale_interval=0.05) as pool:
        out = await asyncio.wait_for(pool.call(rollout_input(alloc_mb=300, hold=30)), 60)
        assert out.error_code == "memory_exceeded", out.error
        assert "exceeded memory_size 160 MB" in out.error
    with pytest.raises(UserCodeError, match=r"setup\(\) raised RuntimeError"):
        await FunctionPool.start(spec("functions.bad_setup.BadSetup", "reward"),
                                 RayBackend(cluster.address))
    await wait_until(lambda: free_cpus() == 2.0)


@slow
async def test_killed_actor_calls_are_retried_and_nothing_is_lost(cluster):
    s = spec(max_retries=3,
             runtime={"capacity": 2, "min_capacity": 2, "max_capacity": 2, "concurrency": 8})
    async with await FunctionPool.start(s, RayBackend(cluster.address)) as pool:
        victim = pool.workers[0].handle

        async def killer():
            await asyncio.sleep(0.5)
            assert pool.workers[0].in_flight > 0  # mid-flight
            ray.kill(victim.actor, no_restart=True)

        calls = [pool.call(rollout_input(str(i), sleep=0.1)) for i in range(300)]
        results, _ = await asyncio.wait_for(
            asyncio.gather(asyncio.gather(*calls), killer()), timeout=180)
        assert len(results) == 300
        bad = [(i, r.error_code, r.error) for i, r in enumerate(results)
               if r.status != TaskStatus.SUCCESS]
        assert not bad, bad[:3]  # every call on the killed actor was retried elsewhere
        assert [r.agent_output.messages[-1]["content"] for r in results] == [
            f"echo {i}" for i in range(300)]
        m = pool.metrics()
        assert m.restarts >= 1 and m.retries >= 1
        assert victim.pid not in {r.agent_output.rollout_extra["pid"] for r in results[250:]}
        assert "lost its Ray actor" in victim.exit_description()
        await wait_until(lambda: len(pool.workers) == 2 and not pool.starting, 90)
    await wait_until(lambda: free_cpus() == 2.0)


@slow
async def test_after_ray_shutdown_a_handle_starts_no_local_ray(cluster):
    """Asking a handle about its worker after this process left Ray must not call Ray: that
    would start a fresh local Ray and write ``~/.ray``, which breaks a later ``ray start``."""
    s = spec(runtime={"capacity": 1, "min_capacity": 1, "max_capacity": 1})
    pool = await FunctionPool.start(s, RayBackend(cluster.address))
    handle = pool.workers[0].handle
    try:
        ray.shutdown()  # what the last disconnect does
        assert not handle.is_alive()
        assert "Ray connection is closed" in handle.exit_description()
        assert handle.rss_bytes() == 0
        assert not ray.is_initialized()
    finally:
        ray.init(address=cluster.address)  # the module's connection, for the fixture's close
        await pool.close()
