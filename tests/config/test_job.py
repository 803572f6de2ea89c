"""JobConfig: both YAML shapes, round trip, string numbers, couplings, clear errors."""

from __future__ import annotations

import pytest

from rltune.config import (
    FunctionComponentRuntime,
    JobConfig,
    RewardFunctionComponent,
    TrainingDataset,
    TrainingType,
    TuningModel,
    load_job_config,
    load_job_config_text,
    validate_hyper_parameters,
)
from rltune.sdk.errors import ConfigError, DatasetError

SDK_SHAPE = """\
name: calc-job
model:
  name: small
functions:
  - type: rollout
    name: calc-rollout
    timeout: 600
    fcmodel:
      zipdir: ./
      classpath: functions/rollout.py:CalcRollout
    runtime:
      concurrency: 8
      min_capacity: 1
      max_capacity: 2
      env: {DEBUG: true}
  - type: reward
    name: exact
    weight: 0.7
    reward_metric_weight: {accuracy: 1.0}
    fcmodel: {classpath: functions.reward.Exact}
  - type: group_reward
    weight: "0.3"
    fcmodel: {classpath: functions.group.Rank}
datasets:
  - type: training
    data_source_type: file_id
    file_name: data/train.jsonl
  - type: validation
    file_name: data/val.jsonl
training:
  type: reinforcement
  hyper_parameters:
    algorithm: grpo
    batch_size: 4
    n_rollouts: 4
    ppo_mini_batch_size: 8
    learning_rate: 2e-6
    kl_loss_coef: "0.002"
    lr_scheduler_type: linear
    save_strategy: steps
  resources: {charge_type: mtu_postpaid, mtu_capacity: 24}
observability: {}
"""

DOC_SHAPE = """\
job_name: "agentic-rl"
workspace_dir: "./ws"
model: "qwen3.5-9b"
mode: "reinforcement"
datasets:
  - type: "training"
    data_source_type: "file_id"
    file_name: "./data/calc_train_min.jsonl"
functions:
  - type: "rollout"
    name: "rollout-1"
    timeout: 600
    fcmodel:
      classpath: "functions.rollout.rollout.CalcXRolloutProcessor"
    runtime: {cpu: 2, memory_size: 4096, concurrency: 30, memory_scale_threshold: 0.6}
  - type: "reward"
    name: "rewards-1"
    weight: 1.0
    timeout: 120
    fcmodel:
      classpath: "functions.reward.reward.DemoRewardProcessor"
training:
  hyper_parameters:
    algorithm: "gspo"
    batch_size: 64
    eval_steps: 1
    kl_loss_coef: 0.002
    learning_rate: 2e-6
    lr_scheduler_type: "linear"
    max_length: 8192
    n_epochs: 1
    n_rollouts: 8
    ppo_mini_batch_size: 8
    save_steps: 100
    save_strategy: "epoch"
    save_total_limit: 1
  resources:
    charge_type: "mtu_postpaid"
"""


def test_sdk_shape_loads_with_typed_components():
    job = load_job_config_text(SDK_SHAPE)
    assert job.name == "calc-job" and job.model.name == "small"
    assert job.rollout is not None and job.rollout.fcmodel.classname == "CalcRollout"
    assert job.rollout.fcmodel.filepath == "functions/rollout.py"
    assert job.rollout.runtime.env_strings() == {"DEBUG": "true"}
    assert [r.name for r in job.rewards] == ["exact"]
    assert job.rewards[0].reward_metric_weight == {"accuracy": 1.0}
    assert job.group_rewards[0].weight == 0.3 and job.group_rewards[0].name == "group_reward"
    hp = job.hyper_parameters
    assert (hp.learning_rate, hp.kl_loss_coef, hp.ppo_mini_batch_size) == (2e-6, 0.002, 8)
    assert job.knobs.clip_ratio_low == 0.2 and job.knobs.loss_agg_mode == "seq-mean-token-mean"
    assert [d.file_name for d in job.training_datasets] == ["data/train.jsonl"]
    assert [d.file_name for d in job.validation_datasets] == ["data/val.jsonl"]
    assert job.training.resources["mtu_capacity"] == 24


def test_documented_shape_maps_onto_sdk_shape():
    job = load_job_config_text(DOC_SHAPE)
    assert job.name == "agentic-rl" and job.model.name == "qwen3.5-9b"
    assert job.training.type is TrainingType.TRAINING_TYPE
    assert job.workspace_dir == "./ws"
    assert all(f.fcmodel.zipdir == "./ws" for f in job.functions)
    assert job.hyper_parameters.max_length == 8192 and job.knobs.algorithm == "gspo"


@pytest.mark.parametrize("text", [SDK_SHAPE, DOC_SHAPE])
def test_dump_and_reload_round_trip(text, tmp_path):
    job = load_job_config_text(text)
    path = job.to_yaml(tmp_path / "out.yaml")
    again = load_job_config(path)
    assert again == job
    assert "job_name" not in path.read_text()  # dumped in the SDK shape


def test_python_construction_like_the_cloud_sdk():
    job = TuningModel(
        model={"name": "nano"},
        functions=[RewardFunctionComponent(fcmodel={"classpath": "r.py:R"},
                                           runtime=FunctionComponentRuntime(concurrency=2))],
        datasets=[TrainingDataset(file_name="t.jsonl")],
        training={"hyper_parameters": {"learning_rate": "1e-5", "n_rollouts": "8"}},
    )
    assert job.rewards[0].name == "reward" and job.rewards[0].weight is None
    assert job.hyper_parameters.n_rollouts == 8
    assert job.rollout is None  # the built-in single-turn rollout will be used


def test_teacher_model_means_opd():
    job = load_job_config_text("model: m\nteacher_model: big\n")
    assert job.training.type is TrainingType.PG_OPD
    assert job.knobs.algorithm == "opd" and job.knobs.advantage_estimator == "opd"
    with pytest.raises(ConfigError, match="teacher_model"):
        load_job_config_text("model: m\ntraining: {type: pg_opd}\n")


def _err(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_job_config_text(text, source="job.yaml")
    return info.value


def test_unknown_key_names_line_and_suggestion():
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    lerning_rate: 0.1\n")
    assert err.where == "job.yaml:4"
    assert "training.hyper_parameters.lerning_rate" in str(err)
    assert "did you mean 'learning_rate'" in err.hint
    err = _err("model: m\nfunctions:\n  - type: reward\n    wieght: 1\n")
    assert "functions[0].wieght" in str(err) and "'weight'" in err.hint


def test_range_error_names_field_value_rule_and_fix():
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    n_rollouts: 5000\n")
    assert err.where == "job.yaml:4"
    assert "n_rollouts = 5000" in err.message and "less than or equal to 1024" in err.message
    assert err.hint == "use a value in [1, 1024]"
    assert err.details[0]["field"] == "training.hyper_parameters.n_rollouts"


def test_coupling_errors():
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    batch_size: 2\n    n_rollouts: 2\n"
               "    ppo_mini_batch_size: 5\n")
    assert "ppo_mini_batch_size = 5" in err.message and "= 4" in err.message
    assert err.where == "job.yaml:6" and "at most 4" in err.hint
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    n_gpus_training: 6\n"
               "    tensor_model_parallel_size: 4\n")
    assert "n_gpus_training = 6" in err.message and "tp x pp x dp" in err.message
    err = _err("model: m\ntraining:\n  hyper_parameters: {max_length: 100, "
               "max_prompt_length: 100}\n")
    assert "max_prompt_length" in err.message
    err = _err("model: m\ntraining:\n  hyper_parameters: {n_rollouts: 1}\n")
    assert "n_rollouts" in err.message and "2 or more" in err.hint


def test_string_numbers_and_bad_values():
    hp = validate_hyper_parameters({"learning_rate": "2e-6", "batch_size": "1e1",
                                    "max_grad_norm": "0.5"})
    assert (hp.learning_rate, hp.batch_size, hp.max_grad_norm) == (2e-6, 10, 0.5)
    with pytest.raises(ConfigError, match="not a boolean"):
        validate_hyper_parameters({"batch_size": True})
    with pytest.raises(ConfigError, match="valid integer"):
        validate_hyper_parameters({"batch_size": "eight"})
    with pytest.raises(ConfigError, match="did you mean 'cosine'"):
        validate_hyper_parameters({"lr_scheduler_type": "cosin"})


def test_several_problems_are_all_listed():
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    batch_size: 0\n    top_p: 3\n")
    assert "2 problems" in err.message
    assert "job.yaml:4" in err.message and "job.yaml:5" in err.message


def test_structural_errors():
    assert "has no class part" in _err("model: m\nfunctions: [{fcmodel: {classpath: X}}]\n").message
    assert "used twice" in _err("model: m\nfunctions: [{type: reward, name: a},"
                                " {type: reward, name: a}]\n").message
    assert "at most one rollout" in _err("model: m\nfunctions: [{}, {}]\n").message
    assert "rollout, reward, group_reward" in _err("model: m\nfunctions: [{type: rwd}]\n").message
    assert "required" in _err("name: x\n").message
    assert "not valid YAML" in _err("model: m\n  x: : y\n").message
    assert "mapping" in _err("- a\n- b\n").message
    assert "min_capacity" in _err("model: m\nfunctions: [{runtime: {min_capacity: 3, "
                                  "max_capacity: 1}}]\n").message
    assert "file_name" in _err("model: m\ndatasets: [{type: training}]\n").hint


def test_overrides_and_missing_file(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text(SDK_SHAPE)
    job = JobConfig.load_from_yaml(p, name="other")
    assert job.name == "other"
    with pytest.raises(ConfigError, match="bogus = 1: unknown key"):
        JobConfig.load_from_yaml(p, bogus=1)
    with pytest.raises(ConfigError, match="not found"):
        load_job_config(tmp_path / "nope.yaml")


def test_dataset_rows_must_cover_batch():
    job = load_job_config_text("model: m\ntraining: {hyper_parameters: {batch_size: 8}}\n")
    job.check_dataset_rows(8)
    with pytest.raises(DatasetError, match="batch_size is 8"):
        job.check_dataset_rows(7, where="train.jsonl")


def test_single_rollout_groups_only_for_opd():
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    n_rollouts: 1\n")
    assert err.where == "job.yaml:4" and "training.hyper_parameters.n_rollouts = 1" in str(err)
    job = load_job_config_text("model: m\nteacher_model: t\ntraining:\n  hyper_parameters:\n"
                               "    n_rollouts: 1\n")
    assert job.hyper_parameters.n_rollouts == 1


@pytest.mark.parametrize(("key", "value", "supported", "hint"), [
    ("tensor_model_parallel_size", 2, "1", "n_gpus_training: N"),
    ("pipeline_model_parallel_size", 2, "1", "n_gpus_training: N"),
    ("nnodes_rollout", 2, "1", "n_gpus_rollout: N"),
])
def test_distributed_keys_this_build_cannot_honour_are_refused(key, value, supported, hint):
    err = _err(f"model: m\ntraining:\n  hyper_parameters:\n    {key}: {value}\n")
    assert f"{key} = {value}" in err.message and "not supported by this build" in err.message
    assert f"may be {supported} (or unset)" in err.message
    assert err.where == "job.yaml:4" and hint in err.hint


def test_single_device_values_of_distributed_keys_are_accepted():
    hp = validate_hyper_parameters({"n_gpus_training": 1, "nnodes_training": 1,
                                    "tensor_model_parallel_size": 1, "n_gpus_rollout": 0})
    assert hp.n_gpus_training == 1
    assert validate_hyper_parameters({}).n_gpus_training is None  # defaults stay accepted


def test_n_gpus_training_above_one_is_data_parallel_without_lora():
    hp = validate_hyper_parameters({"n_gpus_training": 4, "kl_loss_coef": 0})
    assert hp.n_gpus_training == 4
    assert validate_hyper_parameters({"n_gpus_training": 2, "algorithm": "dapo"})  # no KL
    # gspo's preset has the KL term on (kl_loss_coef 0.001): every rank holds a reference
    job = load_job_config_text("model: m\ntraining:\n  hyper_parameters:\n"
                               "    n_gpus_training: 2\n")
    assert job.knobs.use_kl_loss and job.hyper_parameters.kl_loss_coef > 0
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    n_gpus_training: 2\n"
               "    kl_loss_coef: 0\n    lora_rank: 8\n")
    assert "LoRA" in err.message and "lora_rank: 0" in err.hint


def test_nnodes_training_multiplies_the_ranks_and_needs_a_cluster():
    from rltune.config import FunctionBackend
    from rltune.config.job_rules import ray_trainer_ranks

    hp = validate_hyper_parameters({"nnodes_training": 2, "n_gpus_training": 3,
                                    "kl_loss_coef": 0})
    assert hp.trainer_ranks == 6
    assert validate_hyper_parameters({"nnodes_training": 2, "kl_loss_coef": 0}).trainer_ranks == 2
    with pytest.raises(ConfigError) as info:  # no cluster: refused by name, before any start
        ray_trainer_ranks(hp, None)
    assert info.value.where == "training.hyper_parameters.nnodes_training"
    assert "nnodes_training: 2 needs a Ray cluster" in info.value.message
    assert "--ray-address" in info.value.hint
    with pytest.raises(ConfigError):
        ray_trainer_ranks(hp, FunctionBackend(type="local"))
    assert ray_trainer_ranks(hp, FunctionBackend(type="ray", address="10.0.0.5:6379"))
    one = validate_hyper_parameters({"nnodes_training": 1})
    assert not ray_trainer_ranks(one, None)  # one node, one rank: the one-process trainer
    # LoRA is refused with several ranks, naming the key that made them (the KL term runs).
    assert load_job_config_text("model: m\ntraining:\n  hyper_parameters:\n"
                                "    nnodes_training: 2\n").knobs.use_kl_loss
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    nnodes_training: 2\n"
               "    kl_loss_coef: 0\n    lora_rank: 8\n")
    assert "nnodes_training = 2" in err.message and "LoRA" in err.message


def test_trainer_placement_and_checkpoint_format_are_checked():
    from rltune.config import FunctionBackend
    from rltune.config.job_rules import ray_trainer_ranks

    hp = validate_hyper_parameters({"nnodes_training": 2, "kl_loss_coef": 0,
                                    "trainer_placement": "strict_spread"})
    assert ray_trainer_ranks(hp, FunctionBackend(type="ray"))
    with pytest.raises(ConfigError) as info:
        ray_trainer_ranks(hp.model_copy(update={"nnodes_training": 1}), None)
    assert info.value.where == "training.hyper_parameters.trainer_placement"
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    trainer_placement: pack\n")
    assert "trainer_placement = 'pack'" in err.message and "nnodes_training" in err.hint
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    trainer_placement: sideways\n")
    assert "trainer_placement" in err.message
    assert validate_hyper_parameters({}).checkpoint_format == "full"
    assert validate_hyper_parameters({"checkpoint_format": "sharded"}).checkpoint_format == \
        "sharded"
    err = _err("model: m\ntraining:\n  hyper_parameters:\n    checkpoint_format: sharded\n"
               "    lora_rank: 8\n")
    assert "checkpoint_format = 'sharded'" in err.message and "LoRA" in err.message


def test_device_keys_are_checked():
    assert validate_hyper_parameters({}).device == "auto"
    assert validate_hyper_parameters({"device": "cuda:1"}).device == "cuda:1"
    with pytest.raises(ConfigError, match="device"):
        validate_hyper_parameters({"device": "tpu"})
    with pytest.raises(ConfigError, match="fp32_master_weights"):
        validate_hyper_parameters({"fp32_master_weights": True})


def test_async_pipeline_keys_are_checked():
    hp = validate_hyper_parameters({})
    assert (hp.max_staleness, hp.partial_rollouts) == (0, False)
    hp = validate_hyper_parameters({"max_staleness": 1, "partial_rollouts": True})
    assert (hp.max_staleness, hp.partial_rollouts) == (1, True)
    for n in (2, 4, 8):  # streaming rollouts: N weight versions ahead
        hp = validate_hyper_parameters({"max_staleness": n, "partial_rollouts": True})
        assert (hp.max_staleness, hp.partial_rollouts) == (n, True)
    with pytest.raises(ConfigError, match=r"max_staleness = 9: .*or equal to 8 .*\[0, 8\]"):
        validate_hyper_parameters({"max_staleness": 9})
    assert validate_hyper_parameters({"max_concurrent_requests": 64}).max_concurrent_requests \
        == 64
    with pytest.raises(ConfigError, match=r"max_concurrent_requests"):
        validate_hyper_parameters({"max_concurrent_requests": 0})
    with pytest.raises(ConfigError, match=r"partial_rollouts.*only applies with max_staleness"):
        validate_hyper_parameters({"partial_rollouts": True})
    assert validate_hyper_parameters({"max_staleness": 2, "scale_lr_by_staleness": True}) \
        .scale_lr_by_staleness
    with pytest.raises(ConfigError, match=r"scale_lr_by_staleness.*only applies with max_stal"):
        validate_hyper_parameters({"scale_lr_by_staleness": True})
    # the built-in engine records log-probs at the sampling temperature (vllm: refused below)
    assert validate_hyper_parameters({"max_staleness": 1, "temperature": 0.7}).temperature == 0.7
    with pytest.raises(ConfigError, match="top_p"):
        validate_hyper_parameters({"max_staleness": 1, "top_p": 0.9})


def test_stop_at_validation_reward_needs_a_validation_dataset():
    hp = "training:\n  hyper_parameters:\n    stop_at_validation_reward: 0.9\n"
    err = _err("model: m\n" + hp)
    assert "stop_at_validation_reward" in err.message and "no validation dataset" in err.message
    assert "type: validation" in err.message + (err.hint or "")
    job = load_job_config_text(
        "model: m\ndatasets: [{type: validation, file_name: v.jsonl}]\n" + hp
    )
    assert job.hyper_parameters.stop_at_validation_reward == 0.9
