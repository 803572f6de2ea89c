"""A job whose rollout and reward functions run as Ray actors on a local two-node Ray cluster,
started with ``rltune train --ray-address``: the policy gateway binds the machine's cluster
address, the steps run, every rollout succeeds, and the cluster's CPUs are free again when the
job ends. Slow tier (cluster start + a 2-step job,
~1-2 min on 2 cores)."""

from __future__ import annotations

import asyncio
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


async def test_a_rollout_actor_killed_mid_job_loses_nothing(tmp_path, tiny_model_dir):
    """Issue 13's acceptance: a function actor killed while its calls are in flight → the calls
    are retried on the replacement instance, no rollout is lost, and the job finishes."""
    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer

    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=12, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update(
        {**QUICK_HYPER_PARAMETERS, "max_steps": 3, "batch_size": 2, "n_rollouts": 4,
         "save_strategy": "no", "eval_steps": 100})
    for fn in job["functions"]:
        fn["runtime"] = {**(fn.get("runtime") or {}), "cpu": 1, "capacity": 1,
                         "min_capacity": 1, "max_capacity": 1}
    with LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=1) as cluster:
        job["function_backend"] = {"type": "ray", "address": cluster.address}
        (ws / "job.yaml").write_text(yaml.safe_dump(job))
        trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws)
        run = asyncio.create_task(trainer.run())
        deadline = time.monotonic() + 240
        while not (getattr(trainer, "rt", None) and getattr(trainer.rt, "runner", None)):
            assert not run.done() and time.monotonic() < deadline, "the job did not start"
            await asyncio.sleep(0.05)
        pool = trainer.rt.runner.caller
        while not (pool.workers and pool.workers[0].in_flight > 0):
            assert not run.done() and time.monotonic() < deadline, "no call ever in flight"
            await asyncio.sleep(0.005)
        ray.kill(pool.workers[0].handle.actor, no_restart=True)  # mid-call
        summary = await asyncio.wait_for(run, timeout=300)
        metrics = pool.metrics()
    assert summary["steps"] == 3, summary
    assert metrics.restarts >= 1 and metrics.retries >= 1, metrics
    steps = [s for s in read_metrics(tmp_path / "job") if s["step"] >= 1]  # 0: validation
    assert [s["step"] for s in steps] == [1, 2, 3]
    # every rollout of every step succeeded: the killed actor's calls were retried, not dropped
    assert all(s["metrics"]["trace/success_rate/agent"] == 1.0 for s in steps), steps


async def test_calc_job_on_ray_learns_as_the_local_gate_asks(tmp_path, nano_model_dir):
    """Issue 13's acceptance: with its rollout and reward functions on Ray actors, the learning
    test's GSPO job on nano reaches the local backend's gate (validation +0.2 in 20 steps,
    tests/trainer/test_learning.py); one run measured each way is in RESULTS.md."""
    from test_learning import assert_rises, calc_job

    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer

    ws = calc_job(tmp_path, nano_model_dir, "gspo", steps=20)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:
        fn["runtime"] = {**(fn.get("runtime") or {}), "cpu": 1, "capacity": 1,
                         "min_capacity": 1, "max_capacity": 1}
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as cluster:
        job["function_backend"] = {"type": "ray", "address": cluster.address}
        (ws / "job.yaml").write_text(yaml.safe_dump(job))
        trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job",
                          base_dir=ws)
        summary = await trainer.run()
    log = (tmp_path / "job" / "train.log").read_text()
    assert log.count("on RayBackend: 1 instance(s)") == len(job["functions"]), log[:2000]
    print("gspo on ray", summary["initial_validation"], summary["validation"])
    assert_rises(summary, by=0.2)
