"""``rltune config schema|reference|synonyms`` and ``rltune train --set``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config.compat.ark_job import is_ark_job
from rltune.config.reference import reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_docs_config_md_is_the_generated_reference():
    assert (ROOT / "docs" / "config.md").read_text(encoding="utf-8") == reference_markdown(), (
        "regenerate it: rltune config reference --out docs/config.md")


def test_the_schema_accepts_the_templates_and_refuses_mistakes(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    r = CliRunner().invoke(app, ["config", "schema", "--out", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    schema = json.loads((tmp_path / "s.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for job in sorted((ROOT / "src" / "rltune" / "templates").glob("*/job.yaml")):
        data = yaml.safe_load(job.read_text())
        if is_ark_job(data):  # Volcano Ark's job.yaml: its own shape, not this schema
            continue
        assert not list(validator.iter_errors(data)), job
    good = {"job_name": "x", "model": "qwen3.5-9b", "mode": "reinforcement",
            "training": {"hyper_parameters": {"num_generations": 4, "beta": 0.01}}}
    assert not list(validator.iter_errors(good))
    for bad in ({"model": "m", "trainin": {}},
                {"model": "m", "training": {"hyper_parameters": {"batch_size": "many"}}},
                {"model": "m", "training": {"hyper_parameters": {"use_vllm": True}}}):
        assert list(validator.iter_errors(bad)), bad


def test_synonym_tables_print():
    r = CliRunner().invoke(app, ["config", "synonyms", "verl"])
    assert r.exit_code == 0 and "`actor_rollout_ref.rollout.n` | `n_rollouts`" in r.output
    assert CliRunner().invoke(app, ["config", "synonyms", "ray"]).exit_code == 2


def test_train_set_overrides_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    job = tmp_path / "job.yaml"
    job.write_text("model: nano\ntraining: {hyper_parameters: {algorithm: grpo}}\n")
    r = CliRunner().invoke(app, ["train", "-c", str(job), "--set", "num_generations=1"])
    assert r.exit_code != 0 and "n_rollouts" in r.output  # grpo needs 2: the set took effect
    r = CliRunner().invoke(app, ["train", "-c", str(job), "--set", "model=qwen3.5-9b"])
    assert r.exit_code != 0
    assert "'qwen3.5-9b' is the cloud code of the hub id 'Qwen/Qwen3.5-9B'" in r.output
    assert not (tmp_path / "runs").exists()
