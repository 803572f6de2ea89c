"""Trackers in real jobs: a bad tracker stops the job before step 1 and a one-step tiny job
with validation reaches every tracker under every name it logs, Ark's aliases too (fast); a
short nano job with every tracker, read back, and its resume continuing the same runs (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.sdk.errors import ConfigError
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

REWARD, VAL = "critic/rewards/mean", "validation/data/reward/mean@1"


def workspace(tmp_path: Path, model_dir: Path, trackers: list, **hp) -> Path:
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=4, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, **hp})
    job["observability"] = {"trackers": trackers}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def test_a_tracker_with_a_bad_uri_stops_the_job_before_step_1(tmp_path, tiny_model_dir):
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    ws = workspace(tmp_path, tiny_model_dir,
                   ["tensorboard", {"type": "mlflow", "uri": "nosuchscheme://db"}])
    job_dir = tmp_path / "job"
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws)
    with pytest.raises(ConfigError, match="tracker mlflow could not start") as err:
        await trainer.run()
    assert err.value.where == "observability.trackers[1]"
    assert read_metrics(job_dir) == []
    log = (job_dir / "train.log").read_text()
    assert "policy gateway" not in log  # nothing was started, no weights loaded


@pytest.mark.slow
async def test_a_nano_job_logs_to_every_tracker_and_resume_continues_the_runs(
        tmp_path, nano_model_dir, monkeypatch):
    for module in ("tensorboard", "mlflow", "wandb", "swanlab", "trackio"):
        pytest.importorskip(module)
    from tracker_readers import (
        mlflow_series,
        swanlab_scalars,
        tensorboard_series,
        wandb_history,
        wandb_run_dirs,
    )
    from trackio.sqlite_storage import SQLiteStorage

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HOME", str(tmp_path))
    trackers = ["tensorboard", "mlflow", "wandb", "swanlab",
                {"type": "trackio", "project": f"nano-{tmp_path.name}"}]
    ws = workspace(tmp_path, nano_model_dir, trackers, n_epochs=1, eval_steps=1,
                   save_steps=1, max_length=360, max_prompt_length=200)
    job_dir = tmp_path / "job"
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir,
                            base_dir=ws).run()
    assert summary["steps"] == 2
    steps = [0, 1, 2]
    tb = tensorboard_series(job_dir / "tensorboard", VAL)
    assert [s for s, _ in tb] == steps
    assert [s for s, _ in tensorboard_series(job_dir / "tensorboard", REWARD)] == [1, 2]
    ckpt = Path(summary["checkpoints"][0])  # checkpoint-1
    ids = json.loads((ckpt / "trainer_state.json").read_text())["trackers"]
    assert set(ids) == {"tensorboard", "mlflow", "wandb", "swanlab", "trackio"}
    uri = f"sqlite:///{job_dir / 'mlflow.db'}"
    assert [s for s, _ in mlflow_series(uri, ids["mlflow"], REWARD)] == [1, 2]
    assert [s for s, _ in mlflow_series(uri, ids["mlflow"], "validation/data/reward/mean_at_1")
            ] == steps
    (wb,) = wandb_run_dirs(job_dir)
    rows = wandb_history(wb, wait_for=REWARD)
    assert [r["_step"] for r in rows if REWARD in r] == [1, 2]
    assert [r["_step"] for r in rows if VAL in r] == steps
    (sw,) = (job_dir / "swanlog").glob("run-*")
    sl = swanlab_scalars(sw)
    assert [s for s, _ in sl[REWARD]] == [1, 2] and [s for s, _ in sl[VAL]] == steps
    logs = SQLiteStorage.get_logs(f"nano-{tmp_path.name}", ids["trackio"])
    assert [r["step"] for r in logs if REWARD in r] == [1, 2]

    # resume from checkpoint-1 in the same job dir (as the job server does): the same runs
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run(
        resume_from=ckpt)
    ids2 = json.loads((job_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json"
                       ).read_text())["trackers"]
    assert ids2 == ids
    log = (job_dir / "train.log").read_text()
    for name in ids:
        assert f"tracker {name}: run {ids[name]} (resumed)" in log
    assert [s for s, _ in mlflow_series(uri, ids["mlflow"], REWARD)] == [1, 2, 2]
    assert len(wandb_run_dirs(job_dir)) == 2  # one offline folder per process, same run id
    assert {d.name.rsplit("-", 1)[1] for d in wandb_run_dirs(job_dir)} == {ids["wandb"]}


ARK_TRAIN, ARK_VAL = "train/reward->final_reward.mean", "test/reward->final_reward.mean"


async def test_a_job_with_validation_and_ark_aliases_reaches_every_tracker(
        tmp_path, tiny_model_dir, monkeypatch):
    """Every metric name a job logs (validation's ``…@1``, Ark's ``…->…`` aliases, verl's and
    TRL's names from ``metric_names``) reaches every tracker under its name or the tracker's
    documented spelling, read back with the tracker's own reader; no tracker turns itself
    off."""
    for module in ("tensorboard", "mlflow", "wandb", "swanlab", "trackio"):
        pytest.importorskip(module)
    from tracker_readers import (
        mlflow_series,
        swanlab_scalars,
        tensorboard_series,
        wandb_history,
        wandb_run_dirs,
    )
    from trackio.sqlite_storage import SQLiteStorage

    from rltune.observability.trackers.mlflow import mlflow_key

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HOME", str(tmp_path))
    project = f"ark-{tmp_path.name}"
    trackers = ["tensorboard", "mlflow", "wandb", "swanlab",
                {"type": "trackio", "project": project}]
    ws = workspace(tmp_path, tiny_model_dir, trackers, max_steps=1, eval_steps=1)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["observability"]["metric_names"] = ["rltune", "verl", "trl"]
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir,
                            base_dir=ws).run()
    assert summary["steps"] == 1
    log = (job_dir / "train.log").read_text()
    assert "failed (metrics)" not in log, log
    names = {REWARD: [1], VAL: [0, 1], ARK_TRAIN: [1], ARK_VAL: [0, 1],
             "reward": [1], "completions/mean_length": [1], "timing_s/step": [1],
             "val-core/data/reward/mean@1": [0, 1]}  # metric_names: verl's and TRL's
    ids = json.loads((Path(summary["checkpoints"][0]) / "trainer_state.json").read_text()
                     )["trackers"]
    uri = f"sqlite:///{job_dir / 'mlflow.db'}"
    (wb,) = wandb_run_dirs(job_dir)
    rows = wandb_history(wb, wait_for=ARK_TRAIN)
    (sw,) = (job_dir / "swanlog").glob("run-*")
    sl = swanlab_scalars(sw)
    logs = SQLiteStorage.get_logs(project, ids["trackio"])
    for name, steps in names.items():
        assert [s for s, _ in tensorboard_series(job_dir / "tensorboard", name)] == steps, name
        assert [s for s, _ in mlflow_series(uri, ids["mlflow"], mlflow_key(name))] == steps, name
        assert [r["_step"] for r in rows if name in r] == steps, name
        assert [s for s, _ in sl.get(name, [])] == steps, (name, sorted(sl))
        assert [r["step"] for r in logs if name in r] == steps, name
    assert mlflow_key(ARK_TRAIN) == "train/reward_to_final_reward.mean"
