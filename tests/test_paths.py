"""rltune.paths: the one resolver of model specs, including published models."""

from __future__ import annotations

import pytest

from rltune.models.registry import resolve_model
from rltune.paths import check_model, published_dir
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


def test_paths_knows_the_demo_sizes_without_importing_the_models(tmp_path):
    import subprocess
    import sys

    from rltune.models.recipes import RECIPES
    from rltune.paths import DEMO_SIZES

    assert tuple(RECIPES) == DEMO_SIZES
    code = ("import sys\nfrom rltune.paths import check_model\n"
            f"print(check_model('nano', {str(tmp_path)!r}).kind)\n"
            "assert not [m for m in sys.modules if m.startswith('rltune.models')]\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "demo"
