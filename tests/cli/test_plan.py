"""``rltune plan``: a real two-step calibration on the tiny model, and the warnings."""

from __future__ import annotations

import json

from test_doctor_alerts import tiny_workspace
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config import JobConfig
from rltune.doctor.plan import detectable_change, warnings

runner = CliRunner()


def test_plan_calibrates_and_warns_about_a_small_validation_set(tmp_path, tiny_model_dir):
    ws = tiny_workspace(tmp_path, tiny_model_dir, train_rows=8, val_rows=4, eval_steps=2)
    res = runner.invoke(app, ["plan", "-c", str(ws / "job.yaml"), "--json"])
    assert res.exit_code == 1, res.output  # warnings
    report = json.loads(res.output)
    est = report["estimate"]
    assert est["total_steps"] == 4 and est["validations"] == 3
    assert est["seconds_per_step"] > 0 and est["total_seconds"] > 4 * est["seconds_per_step"]
    assert est["tokens_per_step"] > 0
    assert abs(est["total_tokens"] - 4 * est["tokens_per_step"]) <= 4
    assert len(report["measured_seconds_per_step"]) == 2
    text = " ".join(report["warnings"])
    assert "can only see changes of" in text  # 4 validation rows
    assert not list(ws.glob("runs/*"))  # nothing of the calibration is kept


def test_the_seed_concurrency_sizing_and_capacity_warnings():
    job = JobConfig(model={"name": "nano"}, functions=[
        {"type": "rollout", "name": "agent", "fcmodel": {"classpath": "a.py:A"},
         "runtime": {"concurrency": 2, "capacity": 1, "max_capacity": 64}}],
        training={"hyper_parameters": {"batch_size": 8, "n_rollouts": 8}})
    out = warnings(job, seconds_per_step=2.0, cores=2, val_rows=0)
    assert any("64 instances" in w and "2 cores" in w for w in out)
    sizing = next(w for w in out if "concurrency sizing" in w)
    assert "= 2 is below" in sizing and "= 38" in sizing  # 8 x 8 / 2 x 1.2
    assert warnings(job.model_copy(update={"functions": []}), seconds_per_step=2.0, cores=2,
                    val_rows=800) == []
    assert detectable_change(800) < 0.05 < detectable_change(256)


def test_plan_takes_sets_and_names_every_bad_one_at_once(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("model: small\n")
    res = runner.invoke(app, ["plan", "-c", str(job), "--set", "top_k=3",
                              "--set", "warmup_ratio=0.1", "--set", "trainer.resume_mode=auto"])
    assert res.exit_code == 2, res.output
    for key in ("top_k", "warmup_ratio", "trainer.resume_mode", "3 problems"):
        assert key in res.output
