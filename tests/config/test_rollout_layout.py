"""The engine's devices from the cloud's keys, as the config reads them (no machine yet):
``inference_tensor_parallel_size`` needs vLLM, ``n_gpus_rollout`` is replicas x tensor
parallelism, and every contradiction is refused naming both keys."""

from __future__ import annotations

import pytest

from rltune.config import HyperParameters, load_job_config_text
from rltune.config.rollout_layout import RolloutLayout, rollout_layout
from rltune.sdk.errors import ConfigError


def _job(keys: str, engine: str = "") -> str:
    return f"model: m\n{engine}training: {{hyper_parameters: {{{keys}}}}}\n"


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load_job_config_text(text)
    return err.value


def test_gpu_layouts_parse_on_a_machine_without_gpus_and_map_onto_the_engine():
    # a client that submits has no GPU: the config takes the keys, the job's machine checks
    job = load_job_config_text(_job("n_gpus_rollout: 4"))
    assert rollout_layout("builtin", job.hyper_parameters) == RolloutLayout(4, 1, 4)
    job = load_job_config_text(_job("n_gpus_rollout: 2, inference_tensor_parallel_size: 2",
                                    "engine: vllm\n"))
    assert rollout_layout("vllm", job.hyper_parameters) == RolloutLayout(1, 2, 2)
    job = load_job_config_text(_job("inference_tensor_parallel_size: 4", "engine: vllm\n"))
    assert rollout_layout("vllm", job.hyper_parameters) == RolloutLayout(1, 4, 4)
    # agreeing keys are fine; 0 and 1 are one engine on the job's device
    job = load_job_config_text(_job("n_gpus_rollout: 3, inference_replicas: 3"))
    assert rollout_layout("builtin", job.hyper_parameters).replicas == 3
    for n in (0, 1):
        assert rollout_layout("builtin", HyperParameters(n_gpus_rollout=n)) == \
            RolloutLayout(1, 1, 0)


def test_tensor_parallelism_on_the_builtin_engine_is_refused_naming_vllm():
    err = _error(_job("inference_tensor_parallel_size: 2"))
    assert "inference_tensor_parallel_size = 2: needs 2 GPUs sharing one engine" in err.message
    assert "built-in engine does not do" in err.message and "engine: vllm" in err.hint


@pytest.mark.parametrize(("keys", "engine", "says", "fix"), [
    ("n_gpus_rollout: 6, inference_tensor_parallel_size: 4", "engine: vllm\n",
     "n_gpus_rollout = 6: is vLLM replicas x inference_tensor_parallel_size (4)",
     "multiple of 4"),
    ("n_gpus_rollout: 4, inference_replicas: 2", "",
     "inference_replicas = 2: contradicts n_gpus_rollout 4, which is 4 engine replicas",
     "remove one of inference_replicas and n_gpus_rollout"),
    ("n_gpus_rollout: 2, device: cpu", "",
     "n_gpus_rollout = 2: puts the inference engine on 2 CUDA GPUs, and device is cpu",
     "device: auto"),
    ("n_gpus_rollout: 2, inference_replica_backend: ray", "",
     "inference_replica_backend ray runs them on the CPUs",
     "remove one of n_gpus_rollout and inference_replica_backend"),
])
def test_contradictions_are_refused_naming_both_keys(keys, engine, says, fix):
    err = _error(_job(keys, engine))
    assert says in err.message, err.message
    assert fix in err.hint

