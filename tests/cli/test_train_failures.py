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


def test_nnodes_training_without_a_ray_cluster_is_refused_by_name(tmp_path, tiny_model_dir):
    """Trainer ranks on several nodes need a Ray cluster: without ``--ray-address`` (or
    ``function_backend: ray``) the run is refused before anything starts, naming the key."""
    ws = _workspace(tmp_path, str(tiny_model_dir))
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["training"]["hyper_parameters"].update({"nnodes_training": 2, "kl_loss_coef": 0})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "--quiet"])
    assert res.exit_code == 2, res.output
    assert "training.hyper_parameters.nnodes_training" in res.output, res.output
    assert "nnodes_training: 2 needs a Ray cluster" in res.output
    assert not list((ws / "runs").glob("*")) if (ws / "runs").exists() else True
    # The job's own process refuses it too (the SDK and the job server start jobs there).
    import pytest

    from rltune.config import load_job_config
    from rltune.sdk.errors import ConfigError
    from rltune.trainer.runtime import TrainingRuntime

    with pytest.raises(ConfigError) as info:
        TrainingRuntime(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "j", base_dir=ws,
                        job_id="ft-x", total_steps=1, log=print)
    assert info.value.where == "training.hyper_parameters.nnodes_training"
