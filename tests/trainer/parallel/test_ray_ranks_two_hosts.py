"""``rltune train`` with ``nnodes_training: 2`` on the two-host rig (``tests/netns_rig.py``):
the job's driver on host A (the Ray head's namespace), one trainer rank per host (gloo across
the veth pair, rank 0's rendezvous store at A's rig address), the rollout and reward functions
as Ray actors reaching the policy gateway on A at A's rig address, a sharded checkpoint, and a
resume from it; and the same job on two 1-CPU hosts with the default
``trainer_cpus_per_rank`` (a rank per host), where a larger setting fails naming it. Nothing
that crosses hosts can use 127.0.0.1: in the rig each namespace's loopback is its own.

Slow tier (~4-5 min each on 2 loaded cores): ``pytest
tests/trainer/parallel/test_ray_ranks_two_hosts.py -m slow`` (as root).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location(  # the two-node job's helpers
    "ray_ranks_job", Path(__file__).parent / "test_ray_ranks_job.py")
ray_ranks_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ray_ranks_job)
ranks_job = ray_ranks_job.ranks_job


def _train_on_host_a(rig, ws: Path, out: Path, tmp_path: Path, *extra: str) -> str:
    proc = rig.run_on(0, [sys.executable, "-m", "rltune.cli.main", "train", "-c",
                          str(ws / "job.yaml"), "-O", str(out), "-q", "--ray-address",
                          rig.address, *extra],
                      timeout=900, env={**ranks_job._env(tmp_path),
                                        "RLTUNE_RAY_PLACEMENT_TIMEOUT": "120"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return (out / "train.log").read_text()


def test_two_host_job_trains_one_rank_per_host_checkpoints_and_resumes(tmp_path, tiny_model_dir):
    from netns_rig import rig_or_skip

    ws = ray_ranks_job._workspace(tmp_path, tiny_model_dir, max_steps=1)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:
        fn["runtime"]["cpu"] = 0.5
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    a, b = tmp_path / "a", tmp_path / "b"
    rig = rig_or_skip(head_cpus=2, worker_cpus=2)
    try:
        log = _train_on_host_a(rig, ws, a, tmp_path)
        line = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
        hosts = sorted(part.split(" (")[1].split(")")[0] for part in line.split("on node ")[1:])
        assert hosts == sorted(rig.hosts), line  # one rank per host, each at its rig address
        assert "step 1/" in log
        # The gateway binds host A's rig address, so rollouts on host B reach it.
        assert f"policy gateway at http://{rig.hosts[0]}:" in log
        for r in (0, 1):
            assert f"rank {r} of 2 ready on cpu" in (a / "ranks" / f"rank-{r}.log").read_text()
        ckpt1 = a / "checkpoints" / "checkpoint-1"
        assert len(list((ckpt1 / "sharded").glob("*.distcp"))) == 2
        job["training"]["hyper_parameters"]["max_steps"] = 2
        (ws / "job.yaml").write_text(yaml.safe_dump(job))
        log = _train_on_host_a(rig, ws, b, tmp_path, "--resume", str(ckpt1))
        assert f"resumed from {ckpt1}" in log and "step 2/" in log
    finally:
        rig.stop()


def test_two_one_cpu_hosts_place_a_rank_each_by_default_and_a_bigger_ask_is_named(
        tmp_path, tiny_model_dir):
    """Both Ray nodes of the rig declare ``--num-cpus 1`` and the job process runs 2 torch
    threads; ``trainer_cpus_per_rank`` is unset, so each rank reserves half the smallest node
    (0.5 CPU, 1 thread), one per host, and the functions (a quarter CPU each) fit beside them:
    the job trains its step. ``trainer_cpus_per_rank: 2`` cannot place, and the job fails
    naming the key."""
    from netns_rig import rig_or_skip

    ws = ray_ranks_job._workspace(tmp_path, tiny_model_dir, max_steps=1)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    assert "trainer_cpus_per_rank" not in job["training"]["hyper_parameters"]
    job["training"]["hyper_parameters"]["save_strategy"] = "no"
    for fn in job["functions"]:
        fn["runtime"]["cpu"] = 0.25
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    env = {**ranks_job._env(tmp_path), "RLTUNE_TORCH_THREADS": "2", "OMP_NUM_THREADS": "2",
           "RLTUNE_RAY_PLACEMENT_TIMEOUT": "60"}
    rig = rig_or_skip(head_cpus=1, worker_cpus=1)
    try:
        out = tmp_path / "a"
        proc = rig.run_on(0, [sys.executable, "-m", "rltune.cli.main", "train", "-c",
                              str(ws / "job.yaml"), "-O", str(out), "-q", "--ray-address",
                              rig.address], timeout=900, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        log = (out / "train.log").read_text()
        line = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
        hosts = sorted(part.split(" (")[1].split(")")[0] for part in line.split("on node ")[1:])
        assert hosts == sorted(rig.hosts), line
        assert "step 1/" in log
        for r in (0, 1):
            assert f"rank {r} of 2 ready on cpu" in (out / "ranks" / f"rank-{r}.log").read_text()
        job["training"]["hyper_parameters"]["trainer_cpus_per_rank"] = 2
        (ws / "big.yaml").write_text(yaml.safe_dump(job))
        proc = rig.run_on(0, [sys.executable, "-m", "rltune.cli.main", "train", "-c",
                              str(ws / "big.yaml"), "-O", str(tmp_path / "b"), "-q",
                              "--ray-address", rig.address], timeout=600,
                          env={**env, "RLTUNE_RAY_PLACEMENT_TIMEOUT": "5"})
        assert proc.returncode != 0
        err = proc.stdout + proc.stderr
        assert "{'CPU': 2.0} (trainer_cpus_per_rank: 2)" in err, err[-3000:]
        assert "nnodes_training" in err, err[-3000:]
    finally:
        rig.stop()
