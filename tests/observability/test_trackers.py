"""Each tracker through the real sink: a few synthetic steps, read back with the tracker's own
reader; resume continues the same run; a tracker that cannot start stops the job first.

The nano-job version of the same checks is test_trackers_job.py (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rltune.config import JobConfig
from rltune.observability.session import JobObservability
from rltune.sdk.errors import ConfigError
from rltune.trainer.sink import FileSink, read_metrics

REWARD, VAL = "critic/rewards/mean", "validation/data/reward/mean@1"


def job(trackers: list) -> JobConfig:
    return JobConfig.model_validate({
        "name": "obs-test", "model": {"name": "nano"},
        "training": {"hyper_parameters": {"learning_rate": 3e-6}},
        "observability": {"trackers": trackers, "sample_trajectories": 2},
    })


def record(step: int, k: int) -> dict:
    return {"rollout_id": f"ft-x-s{step}-p0.r{k}.a0", "status": "success", "reward": 0.5 * k,
            "advantage": 0.1, "num_llm_calls": 2, "response_tokens": 9,
            "messages": [{"role": "user", "content": "What is 2+3?"},
                         {"role": "assistant", "content": f"answer {k}"}]}


def run_steps(config: JobConfig, job_dir: Path, steps: range, resume: Path | None = None) -> dict:
    """What the trainer does with its sink, for ``steps``; returns the tracker run ids."""
    sink = FileSink(job_dir)
    try:
        with JobObservability.open(config, job_dir=job_dir, job_id="ft-obs", sink=sink,
                                   resume_from=resume) as obs:
            for step in steps:
                obs.sink.trajectories(step, [record(step, k) for k in range(3)])
                obs.sink.metrics(step, {REWARD: step / 10, VAL: step / 5, "actor/lr": 3e-6,
                                        "actor/grad_norm": float("nan")})
            return obs.run_ids()
    finally:
        sink.close()


def same(actual: list, expected: list) -> bool:
    """Equal tuples of numbers, floats to 1e-6 (TensorBoard stores float32)."""
    return len(actual) == len(expected) and all(
        len(a) == len(e) and all(abs(x - y) < 1e-6 for x, y in zip(a, e, strict=True))
        for a, e in zip(actual, expected, strict=True))


def checkpoint_with(tmp_path: Path, run_ids: dict, step: int = 3) -> Path:
    """A checkpoint folder's trainer_state.json as ``Trainer._trainer_state`` writes it."""
    ckpt = tmp_path / f"checkpoint-{step}"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text(json.dumps({"step": step, "trackers": run_ids}))
    return ckpt


def test_tensorboard_event_files_have_the_step_series(tmp_path):
    pytest.importorskip("tensorboard")
    from tracker_readers import tensorboard_series

    ids = run_steps(job(["tensorboard"]), tmp_path / "a", range(1, 4))
    logdir = Path(ids["tensorboard"])
    assert logdir == (tmp_path / "a" / "tensorboard").resolve()
    assert same(tensorboard_series(logdir, REWARD), [(1, .1), (2, .2), (3, .3)])
    # resume: a new job dir, the same log folder, steps continue
    ids2 = run_steps(job(["tensorboard"]), tmp_path / "b", range(4, 6),
                     resume=checkpoint_with(tmp_path, ids))
    assert ids2 == ids
    assert [s for s, _ in tensorboard_series(logdir, VAL)] == [1, 2, 3, 4, 5]
    # the file sink still has everything, NaN as null
    assert read_metrics(tmp_path / "a")[0]["metrics"]["actor/grad_norm"] is None


def test_mlflow_local_store_has_the_step_series_params_and_tables(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient
    from tracker_readers import mlflow_series

    ids = run_steps(job(["mlflow"]), tmp_path / "a", range(1, 4))
    uri = f"sqlite:///{(tmp_path / 'a' / 'mlflow.db').resolve()}"
    run_id = ids["mlflow"]
    assert same(mlflow_series(uri, run_id, REWARD), [(1, .1), (2, .2), (3, .3)])
    # MLflow refuses '@' in names: the one rename
    assert same(mlflow_series(uri, run_id, "validation/data/reward/mean_at_1")[-1:], [(3, .6)])
    run = MlflowClient(uri).get_run(run_id)
    assert run.data.params["training.hyper_parameters.learning_rate"] == "3e-06"
    assert run.info.status == "FINISHED"
    arts = [a.path for a in MlflowClient(uri).list_artifacts(run_id, "samples")]
    assert arts == [f"samples/step_00000{i}.json" for i in (1, 2, 3)]
    # resume continues the same run id in the same store
    cfg = job([{"type": "mlflow", "uri": uri}])
    ids2 = run_steps(cfg, tmp_path / "b", range(4, 5), resume=checkpoint_with(tmp_path, ids))
    assert ids2 == ids
    assert [s for s, _ in mlflow_series(uri, run_id, REWARD)] == [1, 2, 3, 4]


def test_wandb_offline_run_has_the_step_series_and_resumes(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from tracker_readers import wandb_history, wandb_run_dirs

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HOME", str(tmp_path))  # wandb writes settings under ~
    ids = run_steps(job(["wandb"]), tmp_path / "a", range(1, 4))
    (run_dir,) = wandb_run_dirs(tmp_path / "a")
    assert run_dir.name.endswith(ids["wandb"])
    rows = [r for r in wandb_history(run_dir, wait_for=REWARD) if REWARD in r]
    assert same([(r["_step"], r[REWARD], r[VAL]) for r in rows],
                [(1, .1, .2), (2, .2, .4), (3, .3, .6)])
    assert [(r["samples/_type"], r["samples/nrows"]) for r in rows] == [("table-file", 2)] * 3
    ids2 = run_steps(job(["wandb"]), tmp_path / "b", range(4, 5),
                     resume=checkpoint_with(tmp_path, ids))
    assert ids2 == ids
    (run_dir2,) = wandb_run_dirs(tmp_path / "b")
    assert run_dir2.name.endswith(ids["wandb"])


def test_swanlab_offline_run_has_the_step_series(tmp_path, monkeypatch):
    pytest.importorskip("swanlab")
    from tracker_readers import swanlab_scalars

    monkeypatch.setenv("HOME", str(tmp_path))
    ids = run_steps(job(["swanlab"]), tmp_path / "a", range(1, 4))
    (run_dir,) = (tmp_path / "a" / "swanlog").glob("run-*")
    assert run_dir.name.endswith(ids["swanlab"])
    series = swanlab_scalars(run_dir)
    assert same(series[REWARD], [(1, .1), (2, .2), (3, .3)])
    assert same(series[VAL][-1:], [(3, .6)])
    ids2 = run_steps(job(["swanlab"]), tmp_path / "b", range(4, 5),
                     resume=checkpoint_with(tmp_path, ids))
    assert ids2 == ids


def test_trackio_local_project_has_the_step_series_and_resumes(tmp_path, monkeypatch):
    pytest.importorskip("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    project = f"p-{tmp_path.name}"  # TRACKIO_DIR is the test process's (tests/conftest.py)
    cfg = job([{"type": "trackio", "project": project}])
    ids = run_steps(cfg, tmp_path / "a", range(1, 4))
    logs = SQLiteStorage.get_logs(project, ids["trackio"])
    rows = [(r["step"], r[REWARD], r[VAL]) for r in logs if REWARD in r]
    assert same(rows, [(1, .1, .2), (2, .2, .4), (3, .3, .6)])
    ids2 = run_steps(cfg, tmp_path / "b", range(4, 5), resume=checkpoint_with(tmp_path, ids))
    assert ids2 == ids
    assert [r["step"] for r in SQLiteStorage.get_logs(project, ids["trackio"]) if REWARD in r] == [
        1, 2, 3, 4]


def test_a_tracker_that_cannot_start_stops_the_job_before_step_1(tmp_path):
    pytest.importorskip("mlflow")
    cfg = job(["tensorboard", {"type": "mlflow", "uri": "nosuchscheme://x/y"}])
    with pytest.raises(ConfigError) as err:
        run_steps(cfg, tmp_path / "a", range(1, 3))
    assert "tracker mlflow could not start" in str(err.value)
    assert err.value.where == "observability.trackers[1]"
    assert read_metrics(tmp_path / "a") == []  # nothing was logged


def test_a_missing_tracker_package_names_the_extra(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_swanlab(name, *a, **kw):
        if name == "swanlab" or name.startswith("swanlab."):
            raise ImportError("No module named 'swanlab'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_swanlab)
    monkeypatch.delitem(__import__("sys").modules, "rltune.observability.trackers.swanlab",
                        raising=False)
    with pytest.raises(ConfigError, match=r"pip install 'rltune\[swanlab\]'"):
        run_steps(job(["swanlab"]), tmp_path, range(1, 2))


def test_tracker_options_are_checked_per_tracker():
    with pytest.raises(Exception, match="tensorboard does not use 'uri'"):
        job([{"type": "tensorboard", "uri": "http://x"}])
    with pytest.raises(Exception, match="wandb mode 'cloud' is not one of"):
        job([{"type": "wandb", "mode": "cloud"}])
    with pytest.raises(Exception, match="listed twice"):
        job(["mlflow", "mlflow"])


def test_cli_trackers_are_added_to_the_config():
    from rltune.config.observability import with_trackers

    base = job([{"type": "mlflow", "uri": "sqlite:///x.db"}]).observability
    merged = with_trackers(base, ["tensorboard", "mlflow"])
    assert [(t.type, t.uri) for t in merged.trackers] == [("mlflow", "sqlite:///x.db"),
                                                         ("tensorboard", None)]
    with pytest.raises(ConfigError, match="use one of: tensorboard, wandb"):
        with_trackers(None, ["neptune"])


def test_rltune_train_refuses_an_unknown_tracker_before_running(tmp_path):
    from typer.testing import CliRunner

    from rltune.cli.main import app
    from rltune.templates import create_workspace

    ws = create_workspace(tmp_path / "ws", train_rows=4, val_rows=2)
    result = CliRunner().invoke(app, ["train", "-c", str(ws / "job.yaml"), "--tracker",
                                      "neptune", "-O", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "unknown tracker 'neptune'" in result.output and "--tracker" in result.output
    assert not (tmp_path / "out").exists()


def test_metric_names_adds_trls_and_verls_names_in_every_tracker_read_back(tmp_path):
    """``metric_names: [rltune, verl, trl]``: TensorBoard (read with its own reader) has each
    metric under rltune's, verl's and TRL's names; metrics.jsonl keeps rltune's only."""
    pytest.importorskip("tensorboard")
    from tracker_readers import tensorboard_series

    cfg = JobConfig.model_validate({
        "name": "obs-test", "model": {"name": "nano"},
        "observability": {"trackers": ["tensorboard"], "metric_names": ["rltune", "verl", "trl"]}})
    sink = FileSink(tmp_path / "a")
    try:
        with JobObservability.open(cfg, job_dir=tmp_path / "a", job_id="ft-obs",
                                   sink=sink) as obs:
            obs.sink.metrics(1, {REWARD: 0.5, VAL: 0.4, "trace/reward/exact/mean": 0.7,
                                 "trajectory/response_length/mean": 12.0,
                                 "timing/s/rollout": 2.0, "critic/rewards/group_std": 0.3})
            logdir = Path(obs.run_ids()["tensorboard"])
    finally:
        sink.close()
    for name, value in (("reward", .5), ("reward_std", .3), ("rewards/exact/mean", .7),
                        ("completions/mean_length", 12.0), ("response_length/mean", 12.0),
                        ("timing_s/gen", 2.0), ("val-core/data/reward/mean@1", .4),
                        (REWARD, .5)):
        assert same(tensorboard_series(logdir, name), [(1, value)]), name
    assert "reward" not in read_metrics(tmp_path / "a")[0]["metrics"]


def test_metric_names_are_checked_and_default_to_rltunes():
    from rltune.config.observability import Observability

    assert Observability().metric_names == ["rltune"]
    assert Observability(metric_names="trl").metric_names == ["trl"]
    with pytest.raises(Exception, match="metric_names"):
        Observability(metric_names=["wandb"])
