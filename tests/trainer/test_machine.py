"""Seed 001's hyper-parameter block on this machine: what it can honour takes effect (the
engine's arguments, the replicas' devices), the rest is refused in one error naming the
hardware each key needs. The CUDA device count is stubbed only at its one query,
``rltune.engine.placement.cuda_device_count``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config import load_job_config_text
from rltune.config.rollout_layout import hardware_problems
from rltune.engine import placement
from rltune.engine.vllm_engine import engine_args
from rltune.sdk.errors import ConfigError
from rltune.trainer.machine import check_machine
from rltune.trainer.runtime import engine_options

HP = "training.hyper_parameters."
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without GPUs")

#: The cloud's hyper-parameter code sample (seed 001), as written.
SEED_001 = json.dumps({
    "algorithm": "gspo", "batch_size": 64, "eval_steps": 1, "kl_loss_coef": 0.002,
    "learning_rate": 2e-6, "lr_scheduler_type": "linear", "lr_warmup_steps": -1,
    "n_epochs": 1, "n_rollouts": 8, "ppo_mini_batch_size": 8, "save_steps": 100,
    "save_strategy": "epoch", "save_total_limit": 1, "max_length": 8192,
    "max_prompt_length": 1024,
    "n_gpus_rollout": 8, "n_gpus_training": 8, "nnodes_rollout": 1, "nnodes_training": 2,
    "inference_tensor_parallel_size": 2, "inference_gpu_memory_utilization": 0.7,
    "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
    "sequence_parallel_size": 1, "expert_model_parallel_size": 1,
})


def _job(hp: str, engine: str = "vllm", **overrides: object):
    data = json.loads(hp) | overrides
    return load_job_config_text(f"model: m\nengine: {engine}\n"
                                f"training: {{hyper_parameters: {json.dumps(data)}}}\n")


def test_seed_001_as_written_lists_every_config_problem_at_once():
    # the built-in engine has neither of the two vLLM keys
    with pytest.raises(ConfigError) as err:
        _job(SEED_001, engine="builtin")
    fields = [d["field"] for d in err.value.details]  # type: ignore[attr-defined]
    assert fields == [HP + "inference_tensor_parallel_size",
                      HP + "inference_gpu_memory_utilization"]
    assert "engine: vllm" in err.value.message
    # with vLLM the block is a valid config (its KL term runs on every trainer rank); what
    # this machine lacks is said where the job runs (below)
    job = _job(SEED_001)
    assert job.hyper_parameters.kl_loss_coef == 0.002
    assert job.hyper_parameters.trainer_ranks == 16


@cpu_only
def test_seed_001_on_this_cpu_machine_is_refused_naming_each_gpu_count():
    job = _job(SEED_001)
    with pytest.raises(ConfigError) as err:
        check_machine(job)
    text = err.value.message
    assert text.startswith("4 problems on this machine:"), text
    lines = text.splitlines()[1:]
    assert [line.split()[1] for line in lines] == [
        "nnodes_training:", "n_gpus_rollout", "inference_tensor_parallel_size",
        "inference_gpu_memory_utilization"]
    assert "nnodes_training: 2 needs a Ray cluster" in lines[0]
    assert "n_gpus_rollout = 8: needs 8 CUDA GPUs for the inference engine, and this " \
        "machine has 0" in lines[1]
    assert "inference_tensor_parallel_size = 2: needs 2 CUDA GPUs for vLLM's tensor " \
        "parallelism, and this machine has 0" in lines[2]
    assert "inference_gpu_memory_utilization = 0.7: needs 1 CUDA GPU" in lines[3]
    assert all("(fix: " in line for line in lines)
    # the keys it honours at their values take effect: 16 ranks on Ray, a 1-node engine
    assert job.hyper_parameters.trainer_ranks == 16


@cpu_only
def test_rltune_train_refuses_the_gpus_it_lacks_before_a_run_exists(tmp_path: Path):
    job = {"model": "m", "training": {"hyper_parameters": {"n_gpus_rollout": 2}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    res = CliRunner().invoke(app, ["train", "-c", str(tmp_path / "job.yaml"), "--quiet"])
    assert res.exit_code == 2, res.output
    assert "n_gpus_rollout = 2: needs 2 CUDA GPUs" in res.output.replace("\n", " ")
    assert not (tmp_path / "runs").exists()


def test_n_gpus_rollout_on_the_builtin_engine_is_one_replica_per_gpu(monkeypatch):
    monkeypatch.setattr(placement, "cuda_device_count", lambda: 4)
    job = _job('{"n_gpus_rollout": 4}', engine="builtin")
    check_machine(job)  # 4 GPUs: nothing to refuse
    opts = engine_options(job, torch.device("cuda", 0))
    assert opts["replicas"] == 4 and opts["tensor_parallel_size"] == 1
    assert opts["replica_devices"] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    monkeypatch.setattr(placement, "cuda_device_count", lambda: 3)
    with pytest.raises(ConfigError, match=r"needs 4 CUDA GPUs .* this machine has 3"):
        check_machine(job)
    # without the key: one engine on the job's device, as before
    opts = engine_options(_job("{}", engine="builtin"), torch.device("cpu"))
    assert (opts["replicas"], opts["replica_devices"], opts["device"]) == (1, ["cpu"], "cpu")


def test_vllm_gets_the_tensor_parallel_size_and_n_gpus_rollout_must_match_it(monkeypatch):
    monkeypatch.setattr(placement, "cuda_device_count", lambda: 8)
    job = _job('{"n_gpus_rollout": 2, "inference_tensor_parallel_size": 2}')
    opts = engine_options(job, torch.device("cuda", 0))
    assert (opts["replicas"], opts["tensor_parallel_size"]) == (1, 2)
    args = engine_args("/m", dtype="bfloat16", max_model_len=512, seed=0, max_batch_size=8,
                       on_cuda=True, sleep_mode=True, gpu_memory_utilization=0.7,
                       tensor_parallel_size=opts["tensor_parallel_size"])
    assert args["tensor_parallel_size"] == 2 and args["gpu_memory_utilization"] == 0.7
    assert "tensor_parallel_size" not in engine_args(
        "/m", dtype="float32", max_model_len=512, seed=0, max_batch_size=8, on_cuda=False,
        sleep_mode=False, gpu_memory_utilization=None)
    # 8 GPUs of tensor parallelism 2 would be 4 vLLM engines: refused by name on any machine
    [(key, value, rule, fix)] = hardware_problems(
        "vllm", _job('{"n_gpus_rollout": 8, "inference_tensor_parallel_size": 2}')
        .hyper_parameters, cuda_devices=8, device="cuda:0")
    assert (key, value) == ("n_gpus_rollout", 8)
    assert "is 4 vLLM engines of 2 GPU(s) each" in rule and "n_gpus_rollout: 2" in fix


@cpu_only
def test_each_builtin_replica_is_started_on_its_own_device(tiny_model_dir):
    from rltune.engine.select import build_engine

    # the second replica is sent to cuda:1, which a CPU build of torch cannot reach
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        build_engine("builtin", tiny_model_dir, model_name="m", threads=1, replicas=2,
                     replica_devices=["cpu", "cuda:1"])
    group = build_engine("builtin", tiny_model_dir, model_name="m", threads=1, replicas=2,
                         replica_devices=["cpu", "cpu"])
    try:
        assert [str(r.device) for r in group.replicas] == ["cpu", "cpu"]
    finally:
        import asyncio

        asyncio.run(group.close())
