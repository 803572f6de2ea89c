"""TRL's and verl's hyper-parameter names: each one takes effect exactly as rltune's key does, or
is refused naming rltune's key; the docs' tables are the module's."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltune.config import load_job_config_text
from rltune.config.hyperparams import HyperParameters
from rltune.config.synonyms import SYNONYMS, markdown_table
from rltune.sdk.errors import ConfigError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "coming-from.md"


def job(hp: dict) -> str:
    import yaml

    return yaml.safe_dump({"model": "small", "training": {"hyper_parameters": hp}})


def resolved(hp: dict):
    j = load_job_config_text(job(hp))
    return j.hyper_parameters, j.knobs


# (foreign keys, rltune keys) that must resolve to the same config
SAME = [
    ({"num_generations": 6}, {"n_rollouts": 6}),
    ({"beta": 0.01}, {"kl_loss_coef": 0.01}),
    ({"epsilon": 0.3}, {"clip_ratio_low": 0.3, "clip_ratio_high": 0.3}),
    ({"epsilon": 0.2, "epsilon_high": 0.28}, {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}),
    ({"epsilon_high": 0.28, "epsilon": 0.2}, {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}),
    ({"loss_type": "grpo"}, {"loss_agg_mode": "seq-mean-token-mean"}),
    ({"loss_type": "dapo"}, {"loss_agg_mode": "token-mean"}),
    ({"scale_rewards": False}, {"norm_adv_by_std": False}),
    ({"scale_rewards": "group"}, {"norm_adv_by_std": True}),
    ({"num_iterations": 2}, {"ppo_epochs": 2}),
    ({"max_completion_length": 256}, {"max_length": 1024 + 256}),
    ({"max_completion_length": 64, "max_prompt_length": 100},
     {"max_length": 164, "max_prompt_length": 100}),
    ({"num_train_epochs": 3}, {"n_epochs": 3}),
    ({"warmup_steps": 5}, {"lr_warmup_steps": 5}),
    ({"actor_rollout_ref.actor.optim.lr": 3e-6}, {"learning_rate": 3e-6}),
    ({"data.train_batch_size": 16}, {"batch_size": 16}),
    ({"actor_rollout_ref.rollout.n": 8}, {"n_rollouts": 8}),
    ({"actor_rollout_ref.actor.clip_ratio_low": 0.1,
      "actor_rollout_ref.actor.clip_ratio_high": 0.3},
     {"clip_ratio_low": 0.1, "clip_ratio_high": 0.3}),
    ({"actor_rollout_ref.actor.kl_loss_type": "low_var_kl"}, {"kl_estimator": "k3"}),
    ({"actor_rollout_ref.actor.kl_loss_coef": 0.005}, {"kl_loss_coef": 0.005}),
    ({"actor_rollout_ref.actor.ppo_mini_batch_size": 2, "actor_rollout_ref.rollout.n": 4},
     {"ppo_mini_batch_size": 8, "n_rollouts": 4}),
    ({"data.max_response_length": 100, "data.max_prompt_length": 50},
     {"max_length": 150, "max_prompt_length": 50}),
    ({"algorithm.filter_groups.enable": True}, {"dynamic_sampling": True}),
    ({"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo"},
     {"importance_sampling_level": "sequence"}),
    ({"trainer.total_training_steps": 7}, {"max_steps": 7}),
]


@pytest.mark.parametrize(("theirs", "ours"), SAME, ids=lambda d: ",".join(d))
def test_a_synonym_resolves_exactly_as_the_rltune_key(theirs, ours):
    assert resolved(theirs) == resolved(ours)
    assert resolved(theirs) != resolved({})  # the synonym changed something


def test_acceptance_num_generations_and_beta_take_effect():
    hp, knobs = resolved({"num_generations": 4, "beta": 0.01})
    assert (hp.n_rollouts, hp.kl_loss_coef) == (4, 0.01)
    assert knobs.use_kl_loss  # beta > 0 keeps the KL term
    hp2, _ = resolved({"num_generations": 6, "beta": 0.5})
    assert (hp2.n_rollouts, hp2.kl_loss_coef) == (6, 0.5)


@pytest.mark.parametrize("syn", [s for s in SYNONYMS if s.refused], ids=lambda s: s.name)
def test_a_refused_name_names_the_rltune_key(syn):
    with pytest.raises(ConfigError) as err:
        load_job_config_text(job({syn.name: 1}))
    text = str(err.value)
    assert syn.name in text and f"use {syn.target}" in text and syn.tool in text


def test_refused_values_name_the_rltune_key():
    with pytest.raises(ConfigError, match="loss_agg_mode"):
        load_job_config_text(job({"loss_type": "dr_grpo"}))
    with pytest.raises(ConfigError, match="norm_adv_by_std"):
        load_job_config_text(job({"scale_rewards": "batch"}))


def test_a_synonym_and_the_rltune_key_disagreeing_is_an_error():
    assert resolved({"num_generations": 4, "n_rollouts": 4})[0].n_rollouts == 4
    with pytest.raises(ConfigError, match=r"num_generations.*n_rollouts|n_rollouts.*num_gen"):
        load_job_config_text(job({"num_generations": 4, "n_rollouts": 8}))
    with pytest.raises(ConfigError, match="keep only one"):
        load_job_config_text(job({"actor_rollout_ref.rollout.n": 2, "num_generations": 3}))


def test_every_target_is_a_hyper_parameter_or_named_elsewhere():
    fields = set(HyperParameters.model_fields)
    for syn in SYNONYMS:
        if not syn.refused:
            assert syn.target in fields, syn
    assert {s.name for s in SYNONYMS if s.target == s.name} <= fields


@pytest.mark.parametrize("tool", ["TRL", "verl"])
def test_the_docs_tables_are_the_modules(tool):
    assert markdown_table(tool) in DOCS.read_text(encoding="utf-8"), (
        f"regenerate the {tool} table in docs/coming-from.md: rltune config synonyms {tool}")
