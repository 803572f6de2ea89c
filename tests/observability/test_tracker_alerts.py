"""The training doctor's alerts reach each tracker (issue 28): W&B and trackio as their own
alerts, TensorBoard, MLflow and SwanLab as text at the alert's step; each read back with the
tracker's own reader, through the real sink the trainer uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trackers import job

from rltune.observability.session import JobObservability
from rltune.trainer.sink import FileSink

LINE = ("step 2 [P9] high truncation rate: responses are cut at max_length (clip_ratio=0.9) "
        "-> max_length +2048")
TITLE = "high truncation rate: responses are cut at max_length"


def run_with_alert(config, job_dir: Path) -> dict:
    """Two steps of metrics and a P9 alert at step 2, as ``Trainer._write_outputs`` sends
    them; returns the tracker run ids."""
    sink = FileSink(job_dir)
    try:
        with JobObservability.open(config, job_dir=job_dir, job_id="ft-alert",
                                   sink=sink) as obs:
            for step in (1, 2):
                obs.sink.metrics(step, {"trajectory/response_length/clip_ratio": 0.9})
            obs.sink.alert(2, "P9", TITLE, LINE)
            return obs.run_ids()
    finally:
        sink.close()


def test_tensorboard_has_the_alert_as_text_at_its_step(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ids = run_with_alert(job(["tensorboard"]), tmp_path)
    acc = EventAccumulator(ids["tensorboard"], size_guidance={"tensors": 0})
    acc.Reload()
    (event,) = acc.Tensors("doctor/alerts")
    assert event.step == 2 and event.tensor_proto.string_val[0].decode() == LINE


def test_mlflow_has_a_tag_per_code_and_the_alerts_artifact(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    ids = run_with_alert(job(["mlflow"]), tmp_path)
    client = MlflowClient(f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}")
    assert client.get_run(ids["mlflow"]).data.tags["doctor/P9"] == LINE
    local = client.download_artifacts(ids["mlflow"], "doctor/alerts.txt", str(tmp_path))
    assert Path(local).read_text() == LINE + "\n"


def test_wandb_offline_run_has_a_wandb_alert_and_the_text(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from tracker_readers import wandb_alerts, wandb_history, wandb_run_dirs

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HOME", str(tmp_path))
    run_with_alert(job(["wandb"]), tmp_path / "a")
    (run_dir,) = wandb_run_dirs(tmp_path / "a")
    assert wandb_alerts(run_dir) == [(f"rltune doctor P9: {TITLE}"[:63], LINE, "WARN")]
    rows = [r for r in wandb_history(run_dir, wait_for="doctor/alert") if "doctor/alert" in r]
    assert [(r["_step"], r["doctor/alert"]) for r in rows] == [(2, LINE)]


def test_swanlab_offline_run_has_the_alert_text(tmp_path, monkeypatch):
    pytest.importorskip("swanlab")
    monkeypatch.setenv("HOME", str(tmp_path))
    run_with_alert(job(["swanlab"]), tmp_path)
    (run_dir,) = (tmp_path / "swanlog").glob("run-*")
    # SwanLab keeps text media in its run folder (no public reader of media records)
    found = [p for p in run_dir.rglob("*") if p.is_file() and LINE.encode() in p.read_bytes()]
    assert found, sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))


def test_trackio_has_a_trackio_alert(tmp_path, monkeypatch):
    pytest.importorskip("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    project = f"p-{tmp_path.name}"  # TRACKIO_DIR is the test process's (tests/conftest.py)
    ids = run_with_alert(job([{"type": "trackio", "project": project}]), tmp_path / "a")
    alerts = SQLiteStorage.get_alerts(project, run_name=ids["trackio"])
    assert [(a["title"], a["text"], a["step"]) for a in alerts] == [
        (f"rltune doctor P9: {TITLE}", LINE, 2)]
