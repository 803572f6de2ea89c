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
    with pytest.raises(ConfigError, match="use use_kl_loss"):  # a refused synonym
        load_job_config_with_sets(job_file, ["algorithm.use_kl_in_reward=true"])
    with pytest.raises(ConfigError, match="n_rollouts"):  # validated like the file
        load_job_config_with_sets(job_file, ["n_rollouts=1"])


def test_apply_sets_builds_missing_sections():
    assert apply_sets({"model": "m"}, ["observability.trackers=[]"]) == {
        "model": "m", "observability": {"trackers": []}}


# The REST copy operation's overrides ({"dotted.key": value}) and `rltune copy --set`.

BASE = {"name": "calc", "model": {"name": "nano"},
        "datasets": [{"type": "training", "file_id": "file-1"}],
        "training": {"hyper_parameters": {"learning_rate": 1e-3, "n_epochs": 1}}}


def test_overrides_take_dotted_keys_bare_knobs_and_list_indexes():
    from rltune.config import JobConfig
    from rltune.config.overrides import apply_overrides, key_path

    out = apply_overrides(BASE, {"training.hyper_parameters.n_epochs": 3, "batch_size": 4,
                                 "hyper_parameters.algorithm": "grpo",
                                 "datasets.0.file_id": "file-2", "name": "calc-2"})
    hp = out["training"]["hyper_parameters"]
    assert hp == {"learning_rate": 1e-3, "n_epochs": 3, "batch_size": 4, "algorithm": "grpo"}
    assert out["datasets"][0]["file_id"] == "file-2" and out["name"] == "calc-2"
    assert BASE["training"]["hyper_parameters"]["n_epochs"] == 1  # the source is untouched
    assert JobConfig.load_from_dict(out).hyper_parameters.batch_size == 4
    # a top-level field is never taken for a hyper-parameter of the same spelling
    assert key_path("model") == ("model",)
    assert key_path("engine") == ("engine",)


def test_an_object_override_merges_into_its_section():
    """A nested object (as a REST copy sends it) is a merge patch, not a new section."""
    from rltune.config import JobConfig
    from rltune.config.overrides import apply_overrides, apply_sets

    out = apply_overrides(BASE, {"training": {"hyper_parameters": {"max_steps": 2}}})
    assert out["training"]["hyper_parameters"] == {"learning_rate": 1e-3, "n_epochs": 1,
                                                   "max_steps": 2}
    hp = JobConfig.load_from_dict(out).hyper_parameters
    assert (hp.learning_rate, hp.max_steps) == (1e-3, 2)
    out = apply_overrides(BASE, {"hyper_parameters": {"n_epochs": None, "batch_size": 4},
                                 "datasets": [{"type": "training", "file_id": "file-9"}]})
    assert out["training"]["hyper_parameters"] == {"learning_rate": 1e-3, "batch_size": 4}
    assert out["datasets"] == [{"type": "training", "file_id": "file-9"}]  # a list replaces
    assert BASE["training"]["hyper_parameters"] == {"learning_rate": 1e-3, "n_epochs": 1}
    sets = apply_sets({"training": {"hyper_parameters": {"learning_rate": 1e-3}}},
                      ["training={hyper_parameters: {max_steps: 2}}"])
    assert sets["training"]["hyper_parameters"] == {"learning_rate": 1e-3, "max_steps": 2}


def test_bad_override_paths_are_refused_naming_the_key():
    from rltune.config.overrides import apply_overrides

    with pytest.raises(ConfigError, match="no list entry 3") as exc:
        apply_overrides(BASE, {"datasets.3.file_id": "x"})
    assert exc.value.where == "override datasets.3.file_id"
    with pytest.raises(ConfigError, match="name is a value") as exc:
        apply_overrides(BASE, {"name.first": "x"})
    with pytest.raises(ConfigError, match="not a dotted path"):
        apply_overrides(BASE, {"training..n_epochs": 1})
    with pytest.raises(ConfigError, match="no such key"):
        apply_overrides(BASE, {"learning_rat": 1})


def test_copy_set_values_are_typed():
    from rltune.config.overrides import parse_assignment

    assert parse_assignment("learning_rate=1e-5") == ("learning_rate", 1e-5)
    assert parse_assignment("training.hyper_parameters.bf16=true") == (
        "training.hyper_parameters.bf16", True)
    assert parse_assignment("batch_size=4") == ("batch_size", 4)
    assert parse_assignment("name=calc: v2") == ("name", "calc: v2")  # a text field: as written
    with pytest.raises(ConfigError, match="is not key=value"):
        parse_assignment("learning_rate")
