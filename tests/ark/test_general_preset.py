"""An Ark job naming the ``general`` preset dataset: its rows join the training rows with the
answer Ark's graders read (``extra.answer``), and the job's own grader (``rl_demo``'s
``exact_grader``) scores them; a short training run of such a job (slow) takes them through
rollouts and grading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.templates import create_workspace
from rltune.trainer.data_prep import load_job_rows

ARK = [sys.executable, "-m", "rltune.ark"]


def _job(ws: Path, model: str = "nano", **hyper: str) -> Path:
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model_reference"]["foundation_model"]["name"] = model
    job["data"]["training_set"]["preset_dataset"] = {"dataset_version_id": "general",
                                                     "inject_sample_count": 6}
    job["hyperparameters"].update(hyper)
    path = ws / "job_general.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def test_the_general_preset_joins_the_rows_and_the_jobs_grader_scores_them(tmp_path):
    ws = create_workspace(tmp_path / "rl", "rl_demo", train_rows=4, val_rows=2)
    cfg = load_job_config(_job(ws))
    assert cfg.data_options.preset_dataset.name == "general"
    train, _ = load_job_rows(cfg, resolve=lambda ds: ws / ds.file_name, log=lambda *a, **k: None)
    preset = [r for r in train if (r.rollout_extra or {}).get("preset") == "general"]
    assert len(train) == 10 and len(preset) == 6
    row = preset[3]  # Ark's sample of the row, and a trajectory with the right answer
    sample = {"messages": row.message_dicts(), "extra": row.extra, "model": "m"}
    right = {"messages": [{"role": "assistant",
                           "content": f"### ANSWER: {row.extra['answer']} ###"}]}
    for trajectory, reward in ((right, 1.0), ({"messages": [{"role": "assistant",
                                                             "content": "no idea"}]}, 0.0)):
        res = subprocess.run([*ARK, "test", "pipeline_plugin", "--fn",
                              "plugins.exact_grader:exact_grader", "--request",
                              json.dumps({"sample": sample, "trajectory": trajectory})],
                             cwd=ws, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["rewards"] == [reward]


@pytest.mark.slow  # a minute on a busy 2-core box
def test_a_short_ark_job_takes_the_general_rows_through(tmp_path, nano_model_dir):
    ws = create_workspace(tmp_path / "rl", "rl_demo", train_rows=2, val_rows=2)
    job = _job(ws, str(nano_model_dir), batch_size="4", num_generations="2",
               ppo_mini_batch_size="8", num_steps="1", test_every_n_steps="100",
               save_every_n_steps="100")
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "rltune.cli.main", "train", "-c", str(job),
                          "-O", str(out), "--quiet"], cwd=ws, capture_output=True, text=True,
                         env={**os.environ, "RLTUNE_HOME": str(tmp_path / "home")}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    assert "preset dataset general: 6 rows join 2 training rows" in (out / "train.log").read_text()
    step = next(json.loads(x)["metrics"] for x in (out / "metrics.jsonl").read_text().splitlines()
                if json.loads(x)["step"] == 1)
    assert step["trace/success_rate/reward"] == 1.0, step  # every grader scored every rollout
    assert step["trace/reward/exact/mean"] >= 0.0
    trajectories = (out / "trajectories" / "step_000001.jsonl").read_text()
    assert "three sharps, in the form ### ANSWER" in trajectories  # a general row was trained
