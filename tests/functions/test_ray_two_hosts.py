"""Functions on two hosts: the two-namespace rig (``tests/netns_rig.py``: host A runs the Ray
head and the job's driver, host B a worker node, joined only by a veth pair), a function pool
with one Ray worker per host, calls from the driver on A answered on both hosts.

Every worker URL is its host's rig address, never 127.0.0.1; from host A, 127.0.0.1 at host
B's worker port is refused, so a URL that used loopback would fail the calls.

Slow tier (two Ray nodes and the actors' runtime environments, ~40 s on 2 cores):
``pytest tests/functions/test_ray_two_hosts.py -m slow`` (as root).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent)]  # conftest, netns_rig as a script

from conftest import WS, rollout_input  # noqa: E402
from rltune.functions import FunctionComponentSpec, FunctionPool  # noqa: E402
from rltune.sdk import TaskStatus  # noqa: E402

CALLS = 16


@pytest.fixture(scope="module")
def two_host_rig():
    from netns_rig import rig_or_skip

    pytest.importorskip("ray")
    rig = rig_or_skip()
    try:
        yield rig
    finally:
        rig.stop()


async def drive(address: str) -> dict:
    """The job's driver on host A: a pool of two 1-CPU workers (one fits on each host)."""
    from rltune.functions.backends.ray_backend import RayBackend

    spec = FunctionComponentSpec(
        classpath="functions.behave.Behave", func_type="rollout", workspace=WS,
        runtime={"capacity": 2, "min_capacity": 2, "max_capacity": 2, "cpu": 1,
                 "concurrency": 4})
    pool = await FunctionPool.start(spec, RayBackend(address))
    try:
        urls = [w.handle.base_url for w in pool.workers]
        outs = await asyncio.gather(*(pool.call(rollout_input(str(i))) for i in range(CALLS)))
        loopback_refused = []
        for url in urls:
            with socket.socket() as s:
                s.settimeout(5)
                loopback_refused.append(s.connect_ex(("127.0.0.1", int(url.rsplit(":", 1)[1]))))
        return {
            "urls": urls, "nodes": [w.handle.node for w in pool.workers],
            "pids": [w.handle.pid for w in pool.workers],
            "errors": [o.error for o in outs if o.status != TaskStatus.SUCCESS],
            "echo": [o.agent_output.messages[-1]["content"] for o in outs
                     if o.status == TaskStatus.SUCCESS],
            "served_by": sorted({o.agent_output.rollout_extra["pid"] for o in outs
                                 if o.status == TaskStatus.SUCCESS}),
            "loopback_connect": loopback_refused,
        }
    finally:
        await pool.close()


@pytest.mark.slow
def test_functions_on_both_hosts_are_reached_at_their_node_address(two_host_rig):
    rig = two_host_rig
    proc = rig.run_on(0, [sys.executable, str(HERE), rig.address], timeout=300,
                      cwd=str(HERE.parent.parent.parent))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    hosts = sorted(u.split("/")[2].rsplit(":", 1)[0] for u in out["urls"])
    assert hosts == sorted(rig.hosts), out  # one worker per host, each at its rig address
    assert len(set(out["nodes"])) == 2
    assert out["errors"] == []
    assert out["echo"] == [f"echo {i}" for i in range(CALLS)]
    assert set(out["served_by"]) <= set(out["pids"]) and out["served_by"]
    # The host-B worker's port on A's loopback answers nothing (host A's own worker is bound
    # to A's rig address, not loopback, so its port is refused there too).
    assert all(code != 0 for code in out["loopback_connect"]), out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(drive(sys.argv[1]))))
