"""A two-host test rig on one machine: two network namespaces joined by a veth pair, each side
its own address in the benchmark range 198.18.0.0/15, ``lo`` up, no default route (so nothing
but the other namespace is reachable), a Ray head in the first and a worker node in the
second. Everything that crosses the two "hosts" must use a node's address: 127.0.0.1 in one
namespace is not the other's. ``stop()`` ends the Ray nodes (as ``LocalRayCluster`` does) and
deletes both namespaces, which removes the veth pair.

Needs root (``ip netns add``); ``netns_or_skip()`` says why where it cannot be made.

Example:
    with NetnsRig() as rig:
        rig.run_on_head([sys.executable, "driver.py", rig.address])
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from typing import Any

import pytest

from ray_cluster import LocalRayCluster

SUBNET = "198.18.{}.{}"  # RFC 2544 benchmark range: never routed anywhere real


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def netns_or_skip() -> None:
    """Skip the calling test, with the reason, where network namespaces cannot be made."""
    if shutil.which("ip") is None:
        pytest.skip("the two-host rig needs iproute2's `ip` (apt-get install iproute2)")
    if os.geteuid() != 0:
        pytest.skip("the two-host rig makes network namespaces: run the test as root")
    probe = f"rtprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except RuntimeError as e:
        pytest.skip(f"cannot make a network namespace here ({e})")
    _ip("netns", "del", probe)


class NetnsRig(LocalRayCluster):
    """Host A (namespace ``ns[0]``, ``hosts[0]``, Ray head) and host B (``ns[1]``,
    ``hosts[1]``, one Ray worker node), ``cpus`` CPUs each."""

    def __init__(self, head_cpus: int = 1, worker_cpus: int = 1, **kw: Any):
        super().__init__(head_cpus=head_cpus, worker_nodes=1, worker_cpus=worker_cpus, **kw)
        tag = uuid.uuid4().hex[:6]
        self.ns = [f"rta{tag}", f"rtb{tag}"]
        self.links = [f"va{tag}", f"vb{tag}"]
        octet = int(tag[:2], 16)
        self.hosts = [SUBNET.format(octet, 1), SUBNET.format(octet, 2)]
        self.address = f"{self.hosts[0]}:{self.port}"
        self._made: list[str] = []

    # -- the network --------------------------------------------------------------------
    def _network_up(self) -> None:
        for ns in self.ns:
            _ip("netns", "add", ns)
            self._made.append(ns)
        _ip("link", "add", self.links[0], "type", "veth", "peer", "name", self.links[1])
        for ns, link, host in zip(self.ns, self.links, self.hosts, strict=True):
            _ip("link", "set", link, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{host}/24", "dev", link)
            _ip("-n", ns, "link", "set", link, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def _network_down(self) -> None:
        for ns in self._made:  # deleting a namespace deletes its end of the veth (and the pair)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()

    def exec_prefix(self, host: int) -> list[str]:
        """The command prefix that runs a program on host ``host`` (0: A, 1: B)."""
        return ["ip", "netns", "exec", self.ns[host]]

    def routes(self, host: int) -> str:
        return subprocess.run(["ip", "-n", self.ns[host], "route"], capture_output=True,
                              text=True, timeout=30).stdout

    # -- the Ray nodes ------------------------------------------------------------------
    def _node_command(self, head: bool, cpus: int) -> list[str]:
        index = len(self.procs)
        cmd = super()._node_command(head, cpus)
        cmd = [c for c in cmd if not c.startswith("--node-ip-address=")]
        return [*self.exec_prefix(index), *cmd, f"--node-ip-address={self.hosts[index]}"]

    def start(self) -> NetnsRig:
        try:
            self._network_up()
        except BaseException:
            self._network_down()
            raise
        try:
            super().start()
        except BaseException:
            self._network_down()
            raise
        return self

    def stop(self, grace: float = 15.0) -> None:
        try:
            super().stop(grace)
        finally:
            self._network_down()

    def run_on(self, host: int, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
        """``cmd`` on host ``host``, as a process in its namespace (e.g. the job's driver)."""
        env = {**os.environ, **kw.pop("env", {})}
        env.pop("RAY_ADDRESS", None)
        return subprocess.run([*self.exec_prefix(host), *cmd], env=env, capture_output=True,
                              text=True, **kw)


def rig_or_skip(**kw: Any) -> NetnsRig:
    """A started rig, or a skip saying why the namespaces cannot be made."""
    netns_or_skip()
    return NetnsRig(**kw).start()
