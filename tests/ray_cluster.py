"""A bounded local Ray cluster on 127.0.0.1 for tests and benchmarks: ``ray start --head`` plus
worker nodes, each ``ray start --block`` in its own process group with its own free ports, so
several can run on one machine. ``stop()`` ends exactly the processes these commands started
(their process groups, then any process whose command line names this cluster's temp dir),
never other Ray clusters on the machine (``ray stop`` would end every one of them).

Example:
    with LocalRayCluster(head_cpus=1, worker_nodes=1) as cluster:
        ray.init(address=cluster.address)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRayCluster:
    def __init__(self, head_cpus: int = 1, worker_nodes: int = 0, worker_cpus: int = 1,
                 start_timeout: float = 120.0,
                 resources: Optional[list[dict[str, float]]] = None):
        """``resources``: custom resources per node, the head first (``ray start
        --resources``)."""
        self.resources = resources or []
        self.head_cpus, self.worker_nodes, self.worker_cpus = head_cpus, worker_nodes, worker_cpus
        self.start_timeout = start_timeout
        # Short: Ray puts unix sockets under it (107-byte path limit).
        self.temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.ray_bin = str(Path(sys.executable).parent / "ray")
        self.procs: list[subprocess.Popen] = []

    def _node_command(self, head: bool, cpus: int) -> list[str]:
        """``ray start`` for the next node (the head first)."""
        cmd = [self.ray_bin, "start", "--block", "--node-ip-address=127.0.0.1",
               f"--num-cpus={cpus}", "--num-gpus=0", "--disable-usage-stats",
               "--object-store-memory=80000000",
               f"--dashboard-agent-listen-port={free_port()}",
               f"--dashboard-agent-grpc-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}",
               "--min-worker-port=0", "--max-worker-port=0"]
        index = len(self.procs)
        if index < len(self.resources):
            cmd += [f"--resources={json.dumps(self.resources[index])}"]
        if head:
            cmd += ["--head", f"--port={self.port}", "--include-dashboard=false",
                    f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}",
                    f"--temp-dir={self.temp_dir}"]
        else:
            cmd += [f"--address={self.address}"]
        return cmd

    def _node(self, head: bool, cpus: int) -> subprocess.Popen:
        cmd = self._node_command(head, cpus)
        log = open(Path(self.temp_dir) / f"node{len(self.procs)}.out", "wb")  # noqa: SIM115
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        proc = subprocess.Popen(["nice", "-n", "10", *cmd], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
        self.procs.append(proc)
        return proc

    def _wait_started(self, proc: subprocess.Popen, index: int) -> None:
        out = Path(self.temp_dir) / f"node{index}.out"
        deadline = time.monotonic() + self.start_timeout
        while b"Ray runtime started" not in out.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start failed:\n{out.read_text()[-3000:]}")
            time.sleep(0.2)

    def _start_worker(self, index: int, tries: int = 3) -> None:
        """Worker node ``index``; again (at most ``tries`` times) when Ray's fixed 30 s wait for
        its raylet to register ran out, as it can on a loaded machine: the failed attempt's
        processes are ended first."""
        for attempt in range(1, tries + 1):
            proc = self._node(False, self.worker_cpus)
            try:
                self._wait_started(proc, index)
                return
            except RuntimeError as exc:
                if attempt == tries or "timed out during startup" not in str(exc):
                    raise
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                self.procs.remove(proc)  # the next attempt is node ``index`` again

    def start(self) -> LocalRayCluster:
        try:
            self._wait_started(self._node(True, self.head_cpus), 0)
            for i in range(self.worker_nodes):
                self._start_worker(i + 1)
        except BaseException:
            self.stop()
            raise
        return self

    def total_cpus(self) -> int:
        return self.head_cpus + self.worker_nodes * self.worker_cpus

    def status(self) -> str:
        """``ray status`` of this cluster (its text)."""
        out = subprocess.run([self.ray_bin, "status", f"--address={self.address}"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout + out.stderr

    def _ours(self) -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if self.temp_dir in " ".join(p.info["cmdline"] or []):
                    found.append(p)
            except psutil.Error:
                pass
        return found

    def stop(self, grace: float = 15.0) -> None:
        for proc in reversed(self.procs):  # workers first, then the head
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        for p in self._ours():  # a process that left its group (none expected)
            try:
                p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
