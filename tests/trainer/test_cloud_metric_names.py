"""The clouds' (verl's) timing names on a real one-step job on the tiny model:
``timing/s/param_sync`` next to ``timing/s/sync``, and the rollouts' model and reward
latencies (``timing/s/rollout/{model_latency,reward_latency}/avg``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from rltune.config import load_job_config
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS


async def test_param_sync_and_rollout_latencies(tmp_path, tiny_model_dir):
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=4, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    # LengthParity (tests/trainer/fixtures): 8 rollouts a group all but always differ in it,
    # so the step updates and syncs the weights
    shutil.copytree(Path(__file__).parent / "fixtures" / "nanws" / "functions",
                    ws / "functions", dirs_exist_ok=True)
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, "max_steps": 1,
                                                "n_rollouts": 8, "save_strategy": "no"})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    last = read_metrics(job_dir)[-1]["metrics"]
    assert last["timing/s/param_sync"] == last["timing/s/sync"] > 0
    model = last["timing/s/rollout/model_latency/avg"]
    assert 0 < model <= last["timing/s/rollout/agent_loop_latency/avg"]
    assert last["timing/s/rollout/reward_latency/avg"] > 0
