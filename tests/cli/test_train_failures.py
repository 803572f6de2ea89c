"""`rltune train` failures: the error reaches train.log; a run that trained nothing leaves no
folder behind."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from rltune.cli.main import app

runner = CliRunner()


def _workspace(tmp_path, model: str):
    ws = tmp_path / "agent"
    res = runner.invoke(app, ["init", "workspace", str(ws), "--train-rows", "16",
                              "--val-rows", "2"])
    assert res.exit_code == 0, res.output
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = model
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def test_a_run_that_fails_before_its_first_step_leaves_no_folder(tmp_path):
    ws = _workspace(tmp_path, str(tmp_path / "no-such-model"))
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "--quiet"])
    assert res.exit_code == 2, res.output
    assert "no-such-model" in res.output  # refused before a run folder exists
    assert not list((ws / "runs").glob("*")) if (ws / "runs").exists() else True


def test_a_run_that_fails_while_starting_removes_its_folder(tmp_path):
    model = tmp_path / "weightless"  # a config.json and no weights: fails while loading
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    ws = _workspace(tmp_path, str(model))
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "--quiet"])
    assert res.exit_code != 0, res.output
    assert "run folder was removed" in res.output, res.output
    assert not list((ws / "runs").glob("*")) if (ws / "runs").exists() else True


def test_a_fatal_error_is_written_to_train_log(tmp_path):
    model = tmp_path / "weightless"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    ws = _workspace(tmp_path, str(model))
    out = tmp_path / "out"
    out.mkdir()  # the user's own folder: kept, with the log
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(out), "--quiet"])
    assert res.exit_code != 0, res.output
    log = (out / "train.log").read_text()
    assert "job failed" in log and "weightless" in log, log
    assert f"the log is in {out / 'train.log'}" in res.output.replace("\n", "")
