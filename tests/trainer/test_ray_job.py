"""A job whose rollout and reward functions run as Ray actors on a local two-node Ray cluster,
started with ``rltune train --ray-address``: the policy gateway binds the machine's cluster
address, the steps run, every rollout succeeds, and the cluster's CPUs are free again when the
job ends. Slow tier (cluster start + a 2-step job,
~1-2 min on 2 cores)."""

from __future__ import annotations

import time

import pytest
import yaml
from typer.testing import CliRunner

from ray_cluster import LocalRayCluster
from rltune.cli.main import app
from rltune.templates import create_workspace
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def test_calc_job_with_functions_on_ray_actors(tmp_path, tiny_model_dir):
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=8, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, "max_steps": 2})
    for fn in job["functions"]:  # one instance each: 2 functions, 2 CPUs in the cluster
        fn["runtime"] = {**(fn.get("runtime") or {}), "cpu": 1, "capacity": 1,
                         "min_capacity": 1, "max_capacity": 1}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as cluster:
        res = CliRunner().invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(job_dir),
                                       "--quiet", "--ray-address", cluster.address])
        assert res.exit_code == 0, res.output
        log = (job_dir / "train.log").read_text()
        assert log.count("on RayBackend: 1 instance(s)") == len(job["functions"]), log[:2000]
        last = read_metrics(job_dir)[-1]["metrics"]
        assert last["trace/success_rate/agent"] == 1.0
        assert "critic/rewards/mean" in last
        ray.init(address=cluster.address)
        try:
            # The gateway bound this machine's cluster address, which every node reaches.
            nodes = {n["NodeManagerAddress"] for n in ray.nodes()}
            gateway = log.split("policy gateway at http://", 1)[1].split(":", 1)[0]
            assert gateway in nodes and gateway != "127.0.0.1", (gateway, nodes)
            deadline = time.monotonic() + 30
            while ray.available_resources().get("CPU", 0) < 2:
                assert time.monotonic() < deadline, ray.available_resources()
                time.sleep(0.2)
        finally:
            ray.shutdown()
