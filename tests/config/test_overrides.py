"""``--set key=value`` overrides any field, typed by the schema; synonyms and dotted paths."""

from __future__ import annotations

import pytest

from rltune.config.overrides import apply_sets, load_job_config_with_sets
from rltune.sdk.errors import ConfigError

JOB = """\
name: calc
model: {name: small, tool_call_parser: hermes}
functions:
  - {type: reward, name: exact, fcmodel: {classpath: "reward.py:Exact"}}
training: {hyper_parameters: {algorithm: grpo, learning_rate: 2e-6}}
"""


@pytest.fixture
def job_file(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text(JOB)
    return p


def test_sets_take_effect_typed_by_the_schema(job_file):
    job = load_job_config_with_sets(job_file, [
        "learning_rate=1e-5", "num_generations=6", "actor_rollout_ref.actor.kl_loss_coef=0.02",
        "training.hyper_parameters.bf16=true", "functions.0.weight=0.5", "name=123",
        "model=other", "engine=vllm", "clip_ratio_high=0.28"])
    hp = job.hyper_parameters
    assert (hp.learning_rate, hp.n_rollouts, hp.kl_loss_coef, hp.bf16) == (1e-5, 6, 0.02, True)
    assert job.functions[0].weight == 0.5 and job.knobs.clip_ratio_high == 0.28
    assert job.name == "123"  # a string field keeps the text as written
    assert (job.model.name, job.model.tool_call_parser) == ("other", "hermes")
    assert job.engine == "vllm"
    assert load_job_config_with_sets(job_file, []).hyper_parameters.learning_rate == 2e-6


def test_bad_sets_are_named(job_file):
    with pytest.raises(ConfigError, match=r"no such key.*did you mean 'n_rollouts'"):
        load_job_config_with_sets(job_file, ["n_rollout=3"])
    with pytest.raises(ConfigError, match="not key=value"):
        load_job_config_with_sets(job_file, ["learning_rate"])
    with pytest.raises(ConfigError, match="no list entry 3"):
        load_job_config_with_sets(job_file, ["functions.3.weight=1"])
    with pytest.raises(ConfigError, match="use kl_loss_coef"):  # a refused synonym
        load_job_config_with_sets(job_file, ["algorithm.kl_ctrl.kl_coef=0.1"])
    with pytest.raises(ConfigError, match="n_rollouts"):  # validated like the file
        load_job_config_with_sets(job_file, ["n_rollouts=1"])


def test_apply_sets_builds_missing_sections():
    assert apply_sets({"model": "m"}, ["observability.trackers=[]"]) == {
        "model": "m", "observability": {"trackers": []}}
