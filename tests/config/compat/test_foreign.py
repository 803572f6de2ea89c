"""A verl launch line (``--set`` overrides) and verl's nested YAML become rltune's job in one
round; a TRL name at the top level is named as TRL's."""

from __future__ import annotations

import pytest

from rltune.config import load_job_config_text
from rltune.config.overrides import load_job_config_with_sets
from rltune.sdk.errors import ConfigError

JOB = """\
functions:
  - {type: reward, name: gsm8k, fcmodel: {classpath: "reward.py:score"}}
"""

#: verl's examples/grpo_trainer launch line, sized for one machine (its GPU keys are refused on
#: a CPU machine: tests/config/test_distributed.py).
VERL_LINE = [
    'algorithm.adv_estimator=grpo', 'data.train_files=data/train.jsonl',
    'data.val_files=data/test.jsonl', 'data.train_batch_size=8', 'data.max_prompt_length=512',
    'data.max_response_length=1024', 'data.filter_overlong_prompts=True',
    "data.truncation='error'", 'actor_rollout_ref.model.path=small',
    'actor_rollout_ref.actor.optim.lr=1e-6', 'actor_rollout_ref.model.use_remove_padding=True',
    'actor_rollout_ref.actor.ppo_mini_batch_size=4',
    'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4',
    'actor_rollout_ref.actor.use_kl_loss=True', 'actor_rollout_ref.actor.kl_loss_coef=0.001',
    'actor_rollout_ref.actor.kl_loss_type=low_var_kl', 'actor_rollout_ref.actor.entropy_coeff=0',
    'actor_rollout_ref.model.enable_gradient_checkpointing=True',
    'actor_rollout_ref.actor.fsdp_config.param_offload=False',
    'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4',
    'actor_rollout_ref.rollout.n=5', 'actor_rollout_ref.ref.fsdp_config.param_offload=True',
    'algorithm.use_kl_in_reward=False', 'algorithm.kl_ctrl.kl_coef=0.001',
    'trainer.critic_warmup=0', 'trainer.logger=["console","tensorboard"]',
    'trainer.project_name=verl_grpo_example_gsm8k', 'trainer.experiment_name=qwen_function_rm',
    'trainer.n_gpus_per_node=1', 'trainer.nnodes=1', 'trainer.save_freq=20', 'trainer.test_freq=5',
    'trainer.total_epochs=15',
]


@pytest.fixture
def job_file(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text(JOB)
    return p


def test_a_verl_launch_line_is_one_round(job_file):
    job = load_job_config_with_sets(job_file, VERL_LINE)
    hp = job.hyper_parameters
    assert (job.model.name, job.name, job.project) == ("small", "qwen_function_rm",
                                                       "verl_grpo_example_gsm8k")
    assert [(d.type.value, d.file_name) for d in job.datasets] == [
        ("training", "data/train.jsonl"), ("validation", "data/test.jsonl")]
    assert (hp.algorithm, hp.batch_size, hp.n_rollouts, hp.learning_rate) == ("grpo", 8, 5, 1e-6)
    assert (hp.max_prompt_length, hp.max_length, hp.ppo_mini_batch_size) == (512, 1536, 20)
    assert (hp.micro_batch_size, hp.n_epochs, hp.save_steps, hp.eval_steps) == (4, 15, 20, 5)
    assert hp.gradient_checkpointing and hp.reference_offload
    assert job.knobs.kl_estimator == "k3" and job.knobs.entropy_coeff == 0
    assert [t.type for t in job.observability.trackers] == ["tensorboard"]


def test_verl_yaml_at_the_top_level_is_read_as_verl():
    job = load_job_config_text(JOB + """\
actor_rollout_ref:
  model: {path: small}
  rollout: {n: 6, name: hf}
data: {train_files: [a.jsonl, b.jsonl], train_batch_size: 4}
algorithm: {adv_estimator: grpo}
""")
    assert (job.model.name, job.engine, job.hyper_parameters.n_rollouts) == ("small",
                                                                             "builtin", 6)
    assert [d.file_name for d in job.training_datasets] == ["a.jsonl", "b.jsonl"]
    with pytest.raises(ConfigError, match=r"sets model to 'other'.*keep only one"):
        load_job_config_text("model: small\nactor_rollout_ref: {model: {path: other}}\n")


def test_a_grpo_config_name_at_the_top_level_is_named_as_trl():
    with pytest.raises(ConfigError) as err:
        load_job_config_text("model: small\nnum_generations: 4\nlearning_rate: 1e-6\n")
    text = str(err.value)
    assert "looks like a TRL GRPOConfig" in text
    assert "learning_rate is a hyper-parameter: put it under training.hyper_parameters" in text
