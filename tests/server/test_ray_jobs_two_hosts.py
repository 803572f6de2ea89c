"""A server job across two hosts, cancelled while it trains: the two-namespace rig
(``tests/netns_rig.py``: host A runs the Ray head, the job server and so the job's driver,
host B a Ray worker node, joined only by a veth pair) runs one job with built-in engine
replicas on both hosts (``inference_replicas: 2``, ``inference_replica_backend: ray``), one
trainer rank per host (``nnodes_training: 2``, gloo across the veth) and its functions as Ray
actors; the test cancels it through the REST API once step 2 is logged.

* One engine replica and one rank on each host; the weight syncs reached both replicas (the
  same weight version, at least 1, on each, and each served requests).
* Every address the driver hands across hosts is a rig address, never loopback: the gateway
  URL (host A's), each function worker's URL, each replica's and rank's node, rank 0's
  rendezvous store; no ``127.0.0.1`` anywhere in the job's log. Each namespace has its own
  loopback, so a loopback address handed to the other host would also fail the job.
* After the cancel the job is CANCELED, no engine, rank or function process is left in either
  namespace (listed per namespace with ``ip netns pids``), every CPU of the cluster is free
  and the placement group is removed.

Slow tier (rig + server + one job of 2-3 steps, ~3-5 min on 2 loaded cores), as root:
``pytest tests/server/test_ray_jobs_two_hosts.py -m slow``. The file is also the driver that
runs on host A (``python test_ray_jobs_two_hosts.py ...``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
MARKS = ("EngineActor", "TrainerRankActor", "FunctionActor", "rltune.functions.worker",
         "rltune.server")  # the job's processes (and the server) on either host
CPUS = 3  # per node: an engine replica, a rank, half a function


def _server_helpers():
    spec = importlib.util.spec_from_file_location("rig_server_conftest",
                                                  HERE.with_name("conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def job_processes(ns: str) -> list[str]:
    """The command lines of the job's processes in network namespace ``ns``."""
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                          timeout=30).stdout.split()
    found = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(m in cmd for m in MARKS):
            found.append(cmd.strip()[:160])
    return found


def _cluster_free(address: str, timeout: float = 120.0) -> dict:
    """Wait until every CPU of the cluster is free and no placement group is alive."""
    import ray

    ray.init(address=address, log_to_driver=False, configure_logging=False)
    try:
        deadline = time.monotonic() + timeout
        while True:
            total = ray.cluster_resources().get("CPU", 0)
            free = ray.available_resources().get("CPU", 0)
            states = sorted({v["state"] for v in ray.util.placement_group_table().values()})
            if free == total and set(states) <= {"REMOVED"}:
                return {"free": free, "total": total, "pg_states": states}
            if time.monotonic() > deadline:
                return {"free": free, "total": total, "pg_states": states, "timeout": True}
            time.sleep(1.0)
    finally:
        ray.shutdown()


def drive(address: str, model_dir: str, root: str, namespaces: list[str]) -> dict:
    """On host A: a server on the rig's cluster, one job submitted, cancelled at step 2."""
    import httpx
    import yaml

    from rltune.client import AgenticRL

    helpers, root_path = _server_helpers(), Path(root)
    home = root_path / "home"
    home.mkdir(parents=True)
    os.environ["RLTUNE_HOME"] = str(home)
    for var in ("RLTUNE_API_KEY", "RLTUNE_BASE_URL", "RAY_ADDRESS"):
        os.environ.pop(var, None)
    srv = helpers.start_server(home, "--ray-address", address)
    out: dict = {}
    try:
        ws = helpers.make_workspace(
            root_path, Path(model_dir), nnodes_training=2, kl_loss_coef=0.0,
            trainer_placement="strict_spread", inference_replicas=2,
            inference_replica_backend="ray", n_epochs=50, save_strategy="no", eval_steps=1000,
            n_rollouts=4)
        # A reward that splits a group (response-length parity): the steps update, so weight
        # syncs happen (the calc reward gives the untrained tiny model 0 everywhere).
        shutil.copytree(HERE.parents[1] / "trainer" / "fixtures" / "nanws" / "functions",
                        ws / "functions", dirs_exist_ok=True)
        job = yaml.safe_load((ws / "job.yaml").read_text())
        job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
        for fn in job["functions"]:
            fn["runtime"]["cpu"] = 0.5
        (ws / "job.yaml").write_text(yaml.safe_dump(job))
        client = AgenticRL(api_key=srv.key, base_url=srv.url).init(ws / "job.yaml")
        import asyncio

        asyncio.run(client.register_functions())
        asyncio.run(client.upload_datasets())
        job_id = client.submit_job().output.job_id
        with httpx.Client(base_url=srv.url, timeout=60,
                          headers={"Authorization": f"Bearer {srv.key}"}) as c:
            def log() -> str:
                got = c.get(f"/v1/jobs/{job_id}/logs", params={"lines": 10**5}).json()
                return "\n".join(got["logs"])

            deadline = time.monotonic() + 720
            while "step 2/" not in log():
                status = c.get(f"/v1/jobs/{job_id}").json()["status"]
                if status not in ("PENDING", "QUEUED", "RUNNING") or \
                        time.monotonic() > deadline:
                    return {"error": f"no step 2 (status {status})", "log": log()[-4000:]}
                time.sleep(1.0)
            out["running"] = {ns: job_processes(ns) for ns in namespaces}
            out["cancel"] = c.post(f"/v1/jobs/{job_id}/cancel").json()["status"]
            deadline = time.monotonic() + 120
            while (status := c.get(f"/v1/jobs/{job_id}").json()["status"]) != "CANCELED":
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            out["status"] = status
            out["log"] = log()
    finally:
        srv.kill(signal.SIGTERM)
    out["cluster"] = _cluster_free(address)
    deadline = time.monotonic() + 60
    while True:
        out["after"] = {ns: job_processes(ns) for ns in namespaces}
        if not any(out["after"].values()) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    return out


def _hosts(line: str) -> list[str]:
    """The node addresses a log line names: ``... on node <id> (<address>)``."""
    return re.findall(r"on node \w+ \(([^)]+)\)", line)


@pytest.mark.slow
def test_a_two_host_job_with_replicas_and_ranks_on_both_hosts_cancels_cleanly(
        tmp_path, tiny_model_dir):
    from netns_rig import rig_or_skip

    pytest.importorskip("ray")
    rig = rig_or_skip(head_cpus=CPUS, worker_cpus=CPUS)
    try:
        proc = rig.run_on(0, [sys.executable, str(HERE), rig.address, str(tiny_model_dir),
                              str(tmp_path / "a"), *rig.ns],
                          timeout=1200, cwd=str(HERE.parents[2]),
                          env={"RLTUNE_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1",
                               "RLTUNE_RAY_PLACEMENT_TIMEOUT": "120"})
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert "error" not in out, out
        log, a, hosts = out["log"], rig.hosts[0], sorted(rig.hosts)
        # One engine replica and one trainer rank on each host, at its rig address.
        replicas = next(ln for ln in log.splitlines() if "engine replicas on Ray:" in ln)
        assert sorted(_hosts(replicas)) == hosts, replicas
        ranks = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
        assert sorted(_hosts(ranks)) == hosts, ranks
        # Rank 0's rendezvous store is on rank 0's node, at that node's rig address.
        store = re.search(r"rendezvous at ([\d.]+):\d+", ranks)
        assert store and store.group(1) == _hosts(ranks)[0], ranks
        assert f"policy gateway at http://{a}:" in log
        urls = re.findall(r"instance\(s\) at (.+)", log)
        assert len(urls) == 2, log[:4000]  # the rollout and the reward function
        for line in urls:
            for url in line.split(", "):
                assert url.split("/")[2].rsplit(":", 1)[0] in rig.hosts, line
        assert "127.0.0.1" not in log and "localhost" not in log, [
            ln for ln in log.splitlines() if "127.0.0.1" in ln or "localhost" in ln]
        # The weight syncs reached both replicas (the same version, >= 1: step 1's update).
        end = re.findall(r"replica (\d) weight version (\d+), (\d+) requests", log)
        assert [int(r) for r, _, _ in end] == [0, 1], log[-3000:]
        versions = {int(v) for _, v, _ in end}
        assert len(versions) == 1 and min(versions) >= 1, end
        assert all(int(n) > 0 for _, _, n in end), end  # both served rollouts
        assert "failed:" not in next(ln for ln in log.splitlines() if "replicas at the end" in ln)
        # While it ran, each host had its engine replica and its rank ...
        for ns in rig.ns:
            running = " ".join(out["running"][ns])
            assert "EngineActor" in running and "TrainerRankActor" in running, out["running"]
        # ... and after the cancel neither host has any of the job's processes.
        assert out["cancel"] == "CANCELED" and out["status"] == "CANCELED", out["status"]
        assert out["after"] == {ns: [] for ns in rig.ns}, out["after"]
        cluster = out["cluster"]
        assert cluster["free"] == cluster["total"] == 2 * CPUS, cluster
        assert set(cluster["pg_states"]) <= {"REMOVED"}, cluster
    finally:
        rig.stop()


if __name__ == "__main__":
    print(json.dumps(drive(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])))
