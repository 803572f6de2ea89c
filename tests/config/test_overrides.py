"""Overrides of a job config (``copy``'s ``overrides``, ``rltune copy --set``)."""

from __future__ import annotations

import pytest

from rltune.config import JobConfig
from rltune.config.overrides import apply_overrides, key_path, parse_assignment
from rltune.sdk.errors import ValidationError

BASE = {"name": "calc", "model": {"name": "nano"},
        "datasets": [{"type": "training", "file_id": "file-1"}],
        "training": {"hyper_parameters": {"learning_rate": 1e-3, "n_epochs": 1}}}


def test_dotted_keys_bare_knobs_and_list_indexes():
    out = apply_overrides(BASE, {"training.hyper_parameters.n_epochs": 3, "batch_size": 4,
                                 "hyper_parameters.algorithm": "grpo",
                                 "datasets.0.file_id": "file-2", "name": "calc-2"})
    hp = out["training"]["hyper_parameters"]
    assert hp == {"learning_rate": 1e-3, "n_epochs": 3, "batch_size": 4, "algorithm": "grpo"}
    assert out["datasets"][0]["file_id"] == "file-2" and out["name"] == "calc-2"
    assert BASE["training"]["hyper_parameters"]["n_epochs"] == 1  # the source is untouched
    assert JobConfig.load_from_dict(out).hyper_parameters.batch_size == 4
    # a top-level field is never taken for a hyper-parameter of the same spelling
    assert key_path("model") == ["model"]
    assert key_path("engine") == ["engine"]


def test_bad_paths_are_refused_naming_the_key():
    with pytest.raises(ValidationError, match="datasets is a list of 1") as exc:
        apply_overrides(BASE, {"datasets.3.file_id": "x"})
    assert exc.value.where == "datasets.3"
    with pytest.raises(ValidationError, match="name is a value") as exc:
        apply_overrides(BASE, {"name.first": "x"})
    with pytest.raises(ValidationError, match="not a dotted path"):
        apply_overrides(BASE, {"training..n_epochs": 1})


def test_set_values_are_yaml():
    assert parse_assignment("learning_rate=1e-5") == ("learning_rate", 1e-5)
    assert parse_assignment("a.b=true") == ("a.b", True)
    assert parse_assignment("x=null") == ("x", None)
    assert parse_assignment("tags=[a, b]") == ("tags", ["a", "b"])
    assert parse_assignment("name=calc: v2") == ("name", "calc: v2")  # not YAML: a string
    with pytest.raises(ValidationError, match="is not key=value"):
        parse_assignment("learning_rate")
