"""Cloud model codes resolve as their hub ids; hosted-only ones name the open alternative."""

from __future__ import annotations

import pytest

from rltune.modelcodes import ENV_VAR, MODEL_CODES, lookup
from rltune.paths import check_model
from rltune.sdk.errors import ConfigError, NotFoundError


def test_the_table_names_hub_ids():
    assert lookup("qwen3.5-9b", overrides={}) == "Qwen/Qwen3.5-9B"
    assert lookup("Qwen3-8B", overrides={}) == "Qwen/Qwen3-8B"  # case-insensitive
    assert lookup("qwen2.5-7b-instruct", overrides={}) == "Qwen/Qwen2.5-7B-Instruct"
    assert lookup("Qwen/Qwen3-8B", overrides={}) is None and lookup("nano", overrides={}) is None
    assert all("/" in hub for hub in MODEL_CODES.values())


@pytest.mark.parametrize(("code", "alternative"), [
    ("doubao-seed-1-6", "Qwen/Qwen3.5-9B"), ("doubao-seed-2-0-mini", "Qwen/Qwen3.5-9B"),
    ("qwen3.5-flash-2026-02-23", "Qwen/Qwen3.5-35B-A3B"), ("qwen-max", "Qwen/Qwen3.5-397B")])
def test_hosted_only_codes_name_the_open_alternative(code, alternative):
    with pytest.raises(NotFoundError) as err:
        lookup(code, overrides={})
    assert "hosted-only" in str(err.value) and alternative in err.value.hint


def test_offline_a_code_names_its_hub_id(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(NotFoundError) as err:
        check_model("qwen3.5-9b", tmp_path / "home")
    assert "'qwen3.5-9b' is the cloud code of the hub id 'Qwen/Qwen3.5-9B'" in str(err.value)
    assert "HF_HUB_OFFLINE" in str(err.value)
    with pytest.raises(NotFoundError, match="hosted-only"):
        check_model("doubao-seed-1-6", tmp_path / "home")


def test_a_user_table_overrides_and_adds_codes(tmp_path, monkeypatch, hf_home):
    table = tmp_path / "codes.yaml"
    table.write_text("my-model: acme/qwen-standin\nqwen3.5-9b: {hosted_only: acme/other}\n")
    monkeypatch.setenv(ENV_VAR, str(table))
    source = check_model("my-model", tmp_path / "home")
    assert (source.kind, source.spec) == ("hub", "acme/qwen-standin") and source.path
    with pytest.raises(NotFoundError, match="hosted-only"):
        check_model("qwen3.5-9b", tmp_path / "home")
    monkeypatch.delenv(ENV_VAR)
    home = tmp_path / "home2"
    home.mkdir()
    (home / "model-codes.yaml").write_text("other-code: acme/qwen-standin\n")
    assert check_model("other-code", home).spec == "acme/qwen-standin"
    (home / "model-codes.yaml").write_text("other-code: [not, a, hub, id]\n")
    with pytest.raises(ConfigError, match="must map each code"):
        check_model("other-code", home)
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="not a file"):
        check_model("anything", home)


def test_the_docs_list_every_code():
    from pathlib import Path

    from rltune.modelcodes import HOSTED_ONLY

    docs = (Path(__file__).resolve().parents[1] / "docs" / "coming-from.md").read_text()
    for code, hub in MODEL_CODES.items():
        assert f"| `{code}` | `{hub}` |" in docs, code
    for code in HOSTED_ONLY:
        assert f"| `{code}" in docs, code
