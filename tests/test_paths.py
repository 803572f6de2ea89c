"""rltune.paths: the one resolver of model specs, including published models."""

from __future__ import annotations

import pytest

from rltune.paths import check_model, published_dir, resolve_model
from rltune.sdk.errors import NotFoundError, ValidationError


def test_a_model_published_in_the_default_workspace_resolves_by_name(tmp_path):
    target = published_dir(tmp_path, "default", "calc-v1")
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    assert resolve_model("calc-v1", tmp_path) == target
    assert check_model("calc-v1", tmp_path).kind == "named"
    other = published_dir(tmp_path, "team-a", "calc-v2")  # another workspace: not by name
    other.mkdir(parents=True)
    (other / "config.json").write_text("{}")
    with pytest.raises(NotFoundError, match="calc-v2"):
        check_model("calc-v2", tmp_path)


def test_a_workspace_name_that_is_a_path_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="cannot hold published models"):
        published_dir(tmp_path, "..", "x")
