"""TRL's and verl's hyper-parameter names: each one takes effect exactly as rltune's key does, or
is refused naming rltune's key; the docs' tables are the module's."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltune.config import load_job_config_text
from rltune.config.compat.synonyms import BY_NAME, SYNONYMS, markdown_table, trl_to_rltune
from rltune.config.hyperparams import HyperParameters
from rltune.sdk.errors import ConfigError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "coming-from.md"


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
        if not syn.refused and not syn.noop:
            assert syn.target in fields, syn
    assert {s.name for s in SYNONYMS if s.target == s.name} <= fields


@pytest.mark.parametrize("tool", ["TRL", "verl"])
def test_the_docs_tables_are_the_modules(tool):
    assert markdown_table(tool) in DOCS.read_text(encoding="utf-8"), (
        f"regenerate the {tool} table in docs/coming-from.md: rltune config synonyms {tool}")


def _dataclass_fields(package: str, file: str, cls: str) -> list[str]:
    """A dataclass's own field names, read from its source (importing trl takes ~14 s)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(package)  # a top-level package: found, not imported
    if spec is None or spec.origin is None:
        pytest.skip(f"{package} is not installed")
    tree = ast.parse((Path(spec.origin).parent / file).read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
            and isinstance(n.target, ast.Name) and "ClassVar" not in ast.unparse(n.annotation)]


def test_every_grpo_config_field_is_classified():
    """TRL's GRPOConfig (TrainingArguments' fields included): each is a synonym, a no-op or a
    refusal with its reason; none is left to a generic "did you mean"."""
    names = [n for n in (
        *_dataclass_fields("transformers", "training_args.py", "TrainingArguments"),
        *_dataclass_fields("trl", "trainer/grpo_config.py", "GRPOConfig"))
        if not n.startswith("_")]
    assert len(names) > 150  # the source was read
    missing = [n for n in names if n not in BY_NAME or BY_NAME[n].tool != "TRL"]
    assert not missing, f"classify these GRPOConfig fields in config/compat/trl_names.py: {missing}"
    unexplained = [n for n in names
                   if (BY_NAME[n].refused or BY_NAME[n].noop) and not BY_NAME[n].why]
    assert not unexplained, f"say why rltune has no equivalent of {unexplained}"


#: A typical GRPOConfig of TRL's docs and examples: ten keyword arguments.
TYPICAL_TRL = {"output_dir": "Qwen2-0.5B-GRPO", "learning_rate": 1e-6, "logging_steps": 10,
               "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
               "num_generations": 4, "max_completion_length": 128, "num_train_epochs": 1,
               "report_to": "none", "beta": 0.04, "bf16": False, "run_name": "grpo-demo"}


def test_a_typical_grpo_config_loads_in_one_round():
    hp, _ = resolved(TYPICAL_TRL)
    assert (hp.micro_batch_size, hp.ppo_mini_batch_size, hp.n_rollouts) == (4, 8, 4)
    assert (hp.max_length, hp.kl_loss_coef, hp.learning_rate) == (1024 + 128, 0.04, 1e-6)


def test_harmless_no_ops_are_accepted_and_harmful_values_refused():
    assert resolved({"logging_steps": 5, "output_dir": "x", "report_to": ["none"]}) == \
        resolved({})
    with pytest.raises(ConfigError, match=r"report_to.*use observability"):
        load_job_config_text(job({"report_to": "wandb"}))
    with pytest.raises(ConfigError, match=r"fp16.*use bf16"):
        load_job_config_text(job({"fp16": True}))


@pytest.mark.parametrize("syn", [s for s in SYNONYMS if s.noop and s.harmless],
                         ids=lambda s: s.name)
def test_a_no_op_accepts_its_harmless_values_only(syn):
    for value in syn.harmless:
        load_job_config_text(job({syn.name: value}))
    with pytest.raises(ConfigError, match=syn.name.replace(".", r"\.")):
        load_job_config_text(job({syn.name: "something-else"}))


def test_three_bad_keys_are_named_in_one_error():
    with pytest.raises(ConfigError) as err:
        load_job_config_text(job({"top_k": 5, "lerning_rate": 1e-5, "warmup_ratio": 0.1,
                                  "batch_size": 4}))
    text = str(err.value)
    assert "3 problems" in text
    for key, fix in (("top_k", "use temperature"), ("lerning_rate", "learning_rate"),
                     ("warmup_ratio", "use lr_warmup_steps")):
        assert key in text and fix in text
    assert [d["field"] for d in err.value.details] == [  # type: ignore[attr-defined]
        "training.hyper_parameters.top_k", "training.hyper_parameters.warmup_ratio",
        "training.hyper_parameters.lerning_rate"]


def test_verl_nested_yaml_and_adv_estimator_are_understood():
    nested = {"algorithm": "grpo",
              "actor_rollout_ref": {"rollout": {"n": 6}, "actor": {"optim": {"lr": 3e-6}}},
              "trainer": {"logger": ["console"], "total_epochs": 2}}
    assert resolved(nested) == resolved({"algorithm": "grpo", "n_rollouts": 6,
                                         "learning_rate": 3e-6, "n_epochs": 2})
    assert resolved({"algorithm.adv_estimator": "grpo"}) == resolved({"algorithm": "grpo"})
    with pytest.raises(ConfigError, match="adv_estimator"):
        load_job_config_text(job({"algorithm.adv_estimator": "rloo"}))


def test_verl_names_without_an_equivalent_are_refused_by_name():
    with pytest.raises(ConfigError) as err:
        load_job_config_text(job({"trainer": {"logger": ["console", "wandb"]},
                                  "actor_rollout_ref": {"actor": {"fsdp_config": {
                                      "wrap_policy": {"min_num_params": 0}}}}}))
    text = str(err.value)
    assert "trainer.logger" in text and "observability" in text and "--tracker" in text
    assert "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params" in text
    assert "is verl's name" in text and "max_rollout_retries" not in text


def test_trl_to_rltune_gives_the_keys_and_every_refusal():
    keys, refused = trl_to_rltune({**TYPICAL_TRL, "top_k": 10, "warmup_ratio": 0.1})
    assert keys["n_rollouts"] == 4 and "output_dir" not in keys
    assert [p["field"] for p in refused] == ["top_k", "warmup_ratio"]
    assert refused[0]["fix"] == "use temperature"
