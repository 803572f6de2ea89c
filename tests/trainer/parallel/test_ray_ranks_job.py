"""``rltune train --ray-address`` with ``nnodes_training: 2`` on a local two-node Ray cluster
started by the test: the two trainer ranks are Ray actors, one per node (``trainer_placement:
strict_spread``), gloo between them; the rollout and reward functions run as Ray actors too.

* Step 1's update equals the one-process update of the same rows (read back from the step's
  trajectories), within fp32 rounding.
* ``checkpoint_format: sharded``: each rank writes its own DCP shard, no full weights file; a
  job resumed from it on two Ray ranks, and one resumed on one process without a cluster, each
  train step 2 exactly as the one-process updater loaded from that checkpoint does.
* Publishing consolidates the sharded checkpoint into a Hugging Face folder.
* A lost node fails the job naming the rank and the node; a killed job process leaves no rank
  and no placement group behind; either way the cluster's CPUs are free again.

Slow tier (~4 min on 2 cores).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from ray_cluster import LocalRayCluster
from rltune.config import load_job_config
from rltune.trainer.parallel.sharded import SHARDED_DIR, sharded_weights
from rltune.trainer.update import PolicyUpdater

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location(  # the n_gpus_training job's helpers
    "ranks_job", Path(__file__).parent / "test_ranks_job.py")
ranks_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ranks_job)


def _workspace(tmp_path: Path, model_dir: Path, **hp) -> Path:
    ws = ranks_job._workspace(tmp_path, model_dir, n_gpus_training=None, nnodes_training=2,
                              trainer_placement="strict_spread", checkpoint_format="sharded",
                              save_strategy="steps", save_steps=1, save_total_limit=5, **hp)
    _one_cpu_functions(ws)
    return ws


def _train(ws: Path, out: Path, tmp_path: Path, *extra: str, config: str = "job.yaml") -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(ws / config),
         "-O", str(out), "-q", *extra],
        capture_output=True, text=True, timeout=900, env=ranks_job._env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return (out / "train.log").read_text()


def _start_until_step_1(ws: Path, out: Path, tmp_path: Path, address: str) -> subprocess.Popen:
    """``rltune train`` in its own session, returned once step 1 is in its log."""
    import time

    with open(tmp_path / "train.out", "wb") as sink:
        job = subprocess.Popen(
            [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(ws / "job.yaml"),
             "-O", str(out), "-q", "--ray-address", address], stdout=sink,
            stderr=subprocess.STDOUT, env=ranks_job._env(tmp_path), start_new_session=True)
    log, deadline = out / "train.log", time.monotonic() + 600
    while "step 1/" not in (log.read_text() if log.exists() else ""):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            raise AssertionError((tmp_path / "train.out").read_text()[-3000:])
        time.sleep(0.5)
    return job


def _one_cpu_functions(ws: Path) -> None:
    """Each function of ``ws``'s job: one instance, one CPU (the ranks get the rest)."""
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:
        fn["runtime"] = {**(fn.get("runtime") or {}), "cpu": 1, "capacity": 1,
                         "min_capacity": 1, "max_capacity": 1}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))


def _from_sharded(ckpt: Path, ws: Path) -> PolicyUpdater:
    """One process, loaded from a sharded checkpoint as a resumed job loads it."""
    from transformers import AutoModelForCausalLM

    cfg = load_job_config(ws / "job.yaml")
    model = AutoModelForCausalLM.from_pretrained(cfg.model.name, dtype=torch.float32)
    up = PolicyUpdater(model, cfg.hyper_parameters, cfg.knobs, total_steps=2, pad_token_id=0)
    up.load_sharded(ckpt / SHARDED_DIR)
    up.load_schedule_state(torch.load(ckpt / "training_state.pt", weights_only=False))
    return up


def test_two_node_job_updates_like_one_process_and_resumes_sharded_on_two_and_one_rank(
        tmp_path, tiny_model_dir):
    torch.set_num_threads(1)
    ws = _workspace(tmp_path, tiny_model_dir, max_steps=2)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    max_length = load_job_config(ws / "job.yaml").hyper_parameters.max_length
    with LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=2) as cluster:
        log = _train(ws, a, tmp_path, "--ray-address", cluster.address)
        line = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
        assert "2 trainer ranks (strict_spread placement" in line, line
        nodes = {part.split(" (")[0] for part in line.split("on node ")[1:]}
        assert len(nodes) == 2, line  # one rank on each node
        for r in (0, 1):  # the job folder is shared here: each rank logs into it
            assert f"rank {r} of 2 ready on cpu" in (a / "ranks" / f"rank-{r}.log").read_text()
        ckpt1 = a / "checkpoints" / "checkpoint-1"
        shards = sorted(p.name for p in (ckpt1 / SHARDED_DIR).glob("*.distcp"))
        assert len(shards) == 2, shards
        assert not (ckpt1 / "model.safetensors").exists()

        one = ranks_job._replay(tiny_model_dir, ranks_job._rows(a, 1, max_length), ws)
        got = sharded_weights(ckpt1)
        ranks_job._assert_close(got, {k: v for k, v in one.model.state_dict().items()
                                      if k in got})
        base = ranks_job._weights(tiny_model_dir)
        assert max(float((got[k] - base[k]).abs().max()) for k in got) > 1e-4  # it trained

        # Resumed on two Ray ranks from the sharded checkpoint.
        log = _train(ws, b, tmp_path, "--resume", str(ckpt1), "--ray-address", cluster.address)
        assert f"resumed from {ckpt1}" in log
    # Resumed on one process, without a cluster.
    job = yaml.safe_load((ws / "job.yaml").read_text())
    params = job["training"]["hyper_parameters"]
    params.update({"nnodes_training": 1})
    params.pop("trainer_placement")
    for fn in job["functions"]:
        fn.pop("runtime")
    (ws / "one.yaml").write_text(yaml.safe_dump(job))
    log = _train(ws, c, tmp_path, "--resume", str(ckpt1), config="one.yaml")
    assert "data parallel" not in log

    for out in (b, c):
        cont = _from_sharded(ckpt1, ws)
        rows = ranks_job._rows(out, 2, max_length)
        assert any(a for r in rows for a in r.advantage)  # step 2 had a signal: it trained
        cont.update(rows)
        got = sharded_weights(out / "checkpoints" / "checkpoint-2")
        ranks_job._assert_close(got, {k: v for k, v in cont.model.state_dict().items()
                                      if k in got})

    # Publishing (what `rltune models publish` runs on the server; `models export` then
    # copies the published folder) consolidates the shards into a Hugging Face folder.
    from transformers import AutoModelForCausalLM

    from rltune.lifecycle.publish import link_model_files

    published = tmp_path / "published" / "m"
    link_model_files(ckpt1, published)
    assert not (published / SHARDED_DIR).exists()
    loaded = AutoModelForCausalLM.from_pretrained(published, dtype=torch.float32).state_dict()
    ranks_job._assert_close(loaded, sharded_weights(ckpt1))


def test_a_two_node_job_places_its_ranks_on_two_one_cpu_nodes(tmp_path, tiny_model_dir):
    """Two nodes of 1 CPU each and the job's default 2 torch threads: with
    ``trainer_cpus_per_rank: 0.5`` (and a quarter CPU per function instance) both ranks place,
    one per node, each with one torch thread, and the job trains its step."""
    ws = _workspace(tmp_path, tiny_model_dir, max_steps=1, trainer_cpus_per_rank=0.5)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:
        fn["runtime"]["cpu"] = 0.25
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    env = {**ranks_job._env(tmp_path), "RLTUNE_TORCH_THREADS": "2", "OMP_NUM_THREADS": "2"}
    out = tmp_path / "job"
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as cluster:
        proc = subprocess.run(
            [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(ws / "job.yaml"),
             "-O", str(out), "-q", "--ray-address", cluster.address],
            capture_output=True, text=True, timeout=900, env={
                **env, "RLTUNE_RAY_PLACEMENT_TIMEOUT": "60"})
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (out / "train.log").read_text()
    line = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
    assert len({part.split(" (")[0] for part in line.split("on node ")[1:]}) == 2, line
    assert "step 1/" in log
    for r in (0, 1):
        assert f"rank {r} of 2 ready on cpu" in (out / "ranks" / f"rank-{r}.log").read_text()


def test_a_lost_node_fails_the_job_naming_the_rank_and_node_and_frees_the_cluster(
        tmp_path, tiny_model_dir):
    """The worker node (its whole ``ray start`` process group: raylet, workers, the rank on
    it) is killed while the job trains: the job fails with an error naming the rank and the
    node, and the cluster's remaining CPUs are free again. The head has 3 CPUs (one rank, the
    two function instances), the worker 1 (the other rank), so only a rank is lost."""
    import os
    import signal
    import time

    ws = _workspace(tmp_path, tiny_model_dir, max_steps=40)
    out = tmp_path / "job"
    with LocalRayCluster(head_cpus=3, worker_nodes=1, worker_cpus=1,
                         resources=[{"node_a": 1}, {"node_b": 1}]) as cluster:
        job = _start_until_step_1(ws, out, tmp_path, cluster.address)
        try:
            log = out / "train.log"
            ray.init(address=cluster.address)
            try:
                worker = next(n["NodeID"] for n in ray.nodes() if "node_b" in n["Resources"])
            finally:
                ray.shutdown()
            line = next(ln for ln in log.read_text().splitlines() if "data parallel on Ray" in ln)
            rank = next(int(part.split(" on node ")[0].split()[-1])
                        for part in line.split(", rank ") if f"on node {worker[:12]}" in part)
            os.killpg(cluster.procs[1].pid, signal.SIGKILL)
            assert job.wait(timeout=300) != 0
        finally:
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        text = log.read_text()
        assert f"trainer rank {rank} of 2 on node {worker[:12]}" in text, text[-3000:]
        assert " died" in text
        ray.init(address=cluster.address)
        try:
            deadline = time.monotonic() + 60
            while ray.available_resources().get("CPU", 0) < 3:
                assert time.monotonic() < deadline, ray.available_resources()
                time.sleep(0.5)
            states = {v["state"] for v in ray.util.placement_group_table().values()}
            assert states <= {"REMOVED"}, states
        finally:
            ray.shutdown()
        deadline = time.monotonic() + 120
        while "0.0/3.0 CPU" not in (status := cluster.status()):
            assert time.monotonic() < deadline, status
            time.sleep(2)


def test_a_killed_job_process_frees_its_ranks_and_placement_group(tmp_path, tiny_model_dir):
    """SIGKILL to the job (no cleanup runs in it): Ray ends the rank actors it owned and
    removes their placement group, so every CPU of the cluster is free again."""
    import os
    import signal
    import time

    ws = _workspace(tmp_path, tiny_model_dir, max_steps=40)
    out = tmp_path / "job"
    with LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=2) as cluster:
        job = _start_until_step_1(ws, out, tmp_path, cluster.address)
        try:
            ray.init(address=cluster.address)
            try:
                assert ray.available_resources().get("CPU", 0) == 0  # ranks + functions
                job.kill()  # the job process alone: its session keeps no helper alive
                job.wait(timeout=60)
                deadline = time.monotonic() + 120
                while ray.available_resources().get("CPU", 0) < 4:
                    assert time.monotonic() < deadline, ray.available_resources()
                    time.sleep(0.5)
                states = {v["state"] for v in ray.util.placement_group_table().values()}
                assert states == {"REMOVED"}, states
            finally:
                ray.shutdown()
        finally:
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_gspo_on_two_ray_nodes_learns_by_the_learning_tests_gate(tmp_path, nano_model_dir):
    """The GSPO learning test's job (tests/trainer/test_learning.py: 20 steps of 8 x 8 on the
    warm-started nano agent) with its trainer as two gloo ranks, one per node of a two-node
    cluster, and its functions as Ray actors: the validation reward rises by the same gate."""
    from rltune.trainer.sink import read_metrics

    spec = importlib.util.spec_from_file_location(
        "learning_test", Path(__file__).parents[1] / "test_learning.py")
    learning = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(learning)
    ws = learning.calc_job(tmp_path, nano_model_dir, "gspo", steps=20, nnodes_training=2,
                           trainer_placement="strict_spread")
    _one_cpu_functions(ws)
    out = tmp_path / "job"
    with LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=2) as cluster:
        log = _train(ws, out, tmp_path, "--ray-address", cluster.address)
    line = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
    assert len({part.split(" (")[0] for part in line.split("on node ")[1:]}) == 2, line
    curve = [(r["step"], r["metrics"]["validation/data/reward/mean@1"])
             for r in read_metrics(out) if "validation/data/reward/mean@1" in r["metrics"]]
    learning.assert_rises({"initial_validation": curve[0][1],
                           "validation": curve[1:]}, by=0.2)
