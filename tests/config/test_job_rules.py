"""Every job rule lives in the job config: the CLI (``rltune train``), the server's submit
and the SDK refuse the same jobs, and validating never changes what it was given."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config import (
    JobConfig,
    RewardFunctionComponent,
    Training,
    TrainingType,
    load_job_config_text,
)
from rltune.sdk.errors import ConfigError
from rltune.server.submit import parse_config

OPD = """model: m
teacher_model: t
training:
  hyper_parameters:
    n_gpus_training: 2
"""


def test_an_opd_job_on_two_trainer_ranks_validates():
    # OPD's preset has no KL term; the check used to read the gspo preset's (KL on)
    job = load_job_config_text(OPD)
    assert job.training.type is TrainingType.PG_OPD and job.hyper_parameters.n_gpus_training == 2
    assert not job.knobs.use_kl_loss
    # an explicit KL term runs on the ranks too (each holds its own frozen reference)
    job = load_job_config_text(OPD + "    use_kl_loss: true\n", source="job.yaml")
    assert job.knobs.use_kl_loss and job.hyper_parameters.n_gpus_training == 2


ENGINE_JOBS = [
    ("training: {hyper_parameters: {inference_gpu_memory_utilization: 0.5}}",
     "inference_gpu_memory_utilization = 0.5: is a vLLM setting", "engine: vllm"),
    ("engine: vllm\ntraining: {hyper_parameters: {inference_replicas: 2}}",
     "inference_replicas = 2: with engine: vllm needs one process per replica",
     "inference_replica_backend: ray"),
    ("training: {hyper_parameters: {inference_replica_backend: ray, device: 'cuda:0'}}",
     "runs each engine replica on the CPU", "device: cpu"),
    ("engine: vllm\ntraining: {hyper_parameters: {inference_replica_backend: ray, "
     "device: 'cuda:0'}}", "runs each engine replica on the CPU", "device: cpu"),
    ("engine: vllm\ntraining: {hyper_parameters: {inference_gpu_memory_utilization: 0.5, "
     "device: cpu}}", "needs a CUDA device", "VLLM_CPU_KVCACHE_SPACE"),
    ("engine: vllm\ntraining: {hyper_parameters: {max_staleness: 1, temperature: 1.3}}",
     "temperature = 1.3: must be 1.0 with max_staleness >= 1 on engine: vllm",
     "engine: builtin"),
]


@pytest.mark.parametrize(("keys", "rule", "fix"), ENGINE_JOBS)
def test_engine_keys_are_refused_by_the_config_the_server_and_the_cli(keys, rule, fix,
                                                                       tmp_path):
    text = "model: m\n" + keys + "\n"
    with pytest.raises(ConfigError, match=rule) as err:
        load_job_config_text(text)
    assert fix in err.value.hint
    with pytest.raises(ConfigError, match=rule):  # POST /v1/jobs with config_yaml
        parse_config(None, text, None)
    with pytest.raises(ConfigError, match=rule):  # and with a config object
        parse_config(load_job_config_text("model: m\n").to_dict() | _keys(keys), None, None)
    (tmp_path / "job.yaml").write_text(text)
    res = CliRunner().invoke(app, ["train", "-c", str(tmp_path / "job.yaml")])
    assert res.exit_code == 2 and rule.split(":")[0] in res.output
    assert not (tmp_path / "runs").exists()


def _keys(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


def test_engine_keys_the_engine_honours_are_accepted():
    job = load_job_config_text("model: m\nengine: vllm\ntraining: {hyper_parameters: "
                               "{inference_gpu_memory_utilization: 0.5, device: 'cuda:1'}}\n")
    assert job.hyper_parameters.inference_gpu_memory_utilization == 0.5
    # device auto: the CUDA rule waits for the engine start, which knows the device
    assert load_job_config_text("model: m\nengine: vllm\ntraining: {hyper_parameters: "
                                "{inference_gpu_memory_utilization: 0.5}}\n")
    assert load_job_config_text("model: m\ntraining: {hyper_parameters: "
                                "{inference_replicas: 3, inference_replica_backend: ray}}\n")
    # vLLM replicas as Ray actors (one process each), on the CPU or with the device not known
    for keys in ("inference_replicas: 2, inference_replica_backend: ray, device: cpu",
                 "inference_replicas: 2, inference_replica_backend: ray"):
        job = load_job_config_text(f"model: m\nengine: vllm\ntraining: {{hyper_parameters: "
                                   f"{{{keys}}}}}\n")
        assert job.engine == "vllm" and job.hyper_parameters.inference_replicas == 2


def test_validating_does_not_change_what_it_was_given():
    training = Training()
    reward = RewardFunctionComponent(fcmodel={"classpath": "r.py:R"})
    data = {"model": "m", "teacher_model": "t", "training": training, "functions": [reward]}
    job = JobConfig.model_validate(data)
    assert job.training.type is TrainingType.PG_OPD and job.functions[0].name == "reward"
    # the caller's objects are as they were: the type and the name are the job's own
    assert training.type is TrainingType.TRAINING_TYPE and reward.name is None
    assert data["training"] is training and data["functions"] == [reward]
    # and a validated job validates to itself (derived values are not re-derived differently)
    assert JobConfig.model_validate(job.model_dump()) == job


def test_unnamed_functions_get_stable_distinct_names():
    job = load_job_config_text(
        "model: m\nfunctions:\n"
        "  - {type: reward, fcmodel: {classpath: 'a.py:A'}}\n"
        "  - {type: reward, name: reward-2, fcmodel: {classpath: 'b.py:B'}}\n"
        "  - {type: reward, fcmodel: {classpath: 'c.py:C'}}\n"
        "  - {type: group_reward, fcmodel: {classpath: 'd.py:D'}}\n")
    assert [f.name for f in job.functions] == ["reward", "reward-2", "reward-2_", "group_reward"]
    with pytest.raises(ConfigError, match="used twice"):
        load_job_config_text("model: m\nfunctions:\n"
                             "  - {type: reward, name: x, fcmodel: {classpath: 'a.py:A'}}\n"
                             "  - {type: reward, name: x, fcmodel: {classpath: 'b.py:B'}}\n")
