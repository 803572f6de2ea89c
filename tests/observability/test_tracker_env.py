"""Each tracker honours its own environment variables where the YAML sets nothing, and the YAML
wins where it does; read back with the trackers' own readers (docs/observability.md)."""

from __future__ import annotations

import pytest
from test_trackers import REWARD, job, run_steps, same

_ALL = ("WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_DIR", "MLFLOW_TRACKING_URI",
        "MLFLOW_EXPERIMENT_NAME", "SWANLAB_MODE", "SWANLAB_PROJ_NAME", "SWANLAB_PROJECT",
        "SWANLAB_LOG_DIR", "SWANLAB_LOGDIR")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in _ALL:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # wandb and swanlab write settings under ~
    monkeypatch.setenv("WANDB_SILENT", "true")


def test_wandb_offline_run_goes_where_its_variables_say(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from tracker_readers import wandb_history, wandb_run_dirs, wandb_run_project

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wdir"))
    ids = run_steps(job(["wandb"]), tmp_path / "job", range(1, 3))
    assert wandb_run_dirs(tmp_path / "job") == []  # not the job dir: WANDB_DIR
    (run_dir,) = wandb_run_dirs(tmp_path / "wdir")
    assert run_dir.name.endswith(ids["wandb"])
    assert wandb_run_project(run_dir) == "from-env"
    rows = [r for r in wandb_history(run_dir, wait_for=REWARD) if REWARD in r]
    assert same([(r["_step"], r[REWARD]) for r in rows], [(1, .1), (2, .2)])


def test_wandb_mode_disabled_writes_no_run_unless_the_yaml_says_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from tracker_readers import wandb_run_dirs, wandb_run_project

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    run_steps(job(["wandb"]), tmp_path / "a", range(1, 2))
    assert wandb_run_dirs(tmp_path / "a") == []
    run_steps(job([{"type": "wandb", "mode": "offline", "project": "from-yaml"}]),
              tmp_path / "b", range(1, 2))
    (run_dir,) = wandb_run_dirs(tmp_path / "b")
    assert wandb_run_project(run_dir) == "from-yaml"


def test_mlflow_logs_to_the_tracking_uri_and_experiment_of_its_variables(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient
    from tracker_readers import mlflow_series

    monkeypatch.chdir(tmp_path)  # MLflow puts a SQLite store's artifacts under the cwd
    uri = f"sqlite:///{tmp_path / 'team.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "env-exp")
    ids = run_steps(job(["mlflow"]), tmp_path / "job", range(1, 3))
    assert not (tmp_path / "job" / "mlflow.db").exists()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("env-exp")
    assert [r.info.run_id for r in client.search_runs([exp.experiment_id])] == [ids["mlflow"]]
    assert same(mlflow_series(uri, ids["mlflow"], REWARD), [(1, .1), (2, .2)])
    # the YAML wins over the variables (a URI MLflow cannot open would stop the job)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuchscheme://x/y")
    ids2 = run_steps(job([{"type": "mlflow", "uri": uri, "project": "yaml-exp"}]),
                     tmp_path / "job2", range(1, 2))
    assert client.get_run(ids2["mlflow"]).info.experiment_id == (
        client.get_experiment_by_name("yaml-exp").experiment_id)
    assert len(client.search_runs([exp.experiment_id])) == 1


def test_swanlab_offline_run_goes_to_its_log_dir_variable(tmp_path, monkeypatch):
    pytest.importorskip("swanlab")
    from tracker_readers import swanlab_scalars

    monkeypatch.setenv("SWANLAB_MODE", "offline")
    monkeypatch.setenv("SWANLAB_LOG_DIR", str(tmp_path / "slog"))
    ids = run_steps(job(["swanlab"]), tmp_path / "job", range(1, 3))
    assert not (tmp_path / "job" / "swanlog").exists()
    (run_dir,) = (tmp_path / "slog").glob("run-*")
    assert run_dir.name.endswith(ids["swanlab"])
    assert same(swanlab_scalars(run_dir)[REWARD], [(1, .1), (2, .2)])
