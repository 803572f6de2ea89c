"""CLI edges of the model lifecycle that need no server."""

import yaml
from typer.testing import CliRunner

from rltune.cli.main import app

runner = CliRunner()


def test_train_refuses_tuned_model_name_and_bad_names(tmp_path):
    ws = tmp_path / "agent"
    assert runner.invoke(app, ["init", "workspace", str(ws)]).exit_code == 0
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["tuned_model_name"] = "calc-v1"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml")])
    assert res.exit_code == 2 and "tuned_model_name" in res.output
    assert "rltune run" in res.output
    job["tuned_model_name"] = "calc v1"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml")])
    assert res.exit_code == 2 and "tuned_model_name" in res.output


def test_published_name_resolves_locally(tmp_path, monkeypatch, tiny_model_dir):
    import shutil

    from rltune.models.registry import resolve_model

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path))
    target = tmp_path / "published" / "default" / "calc-v1"
    shutil.copytree(tiny_model_dir, target)
    assert resolve_model("calc-v1") == target
