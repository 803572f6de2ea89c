"""A training job with ``inference_replicas: 2``: the gateway's calls are spread over both
built-in engines, every update reaches both, and the asynchronous pipeline's per-token weight
versions stay right (``max_staleness: 1`` with partial rollouts). Slow tier (a 3-step job on
the tiny model, ~1 min on 2 cores)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.engine.group import EngineGroup
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

pytestmark = pytest.mark.slow
NANWS = Path(__file__).parents[1] / "trainer" / "fixtures" / "nanws"


async def test_a_job_with_two_engine_replicas_trains(tmp_path, tiny_model_dir):
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=12, val_rows=4)
    shutil.copytree(NANWS / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update({
        **QUICK_HYPER_PARAMETERS, "max_steps": 3, "n_rollouts": 4, "eval_steps": 3,
        "save_strategy": "no", "max_staleness": 1, "partial_rollouts": True,
        "inference_replicas": 2})
    # a reward every untrained group has a signal in: every step updates
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws)
    await trainer.run()

    engine = trainer.rt.engine
    assert isinstance(engine, EngineGroup) and len(engine.replicas) == 2
    assert all(n > 0 for n in engine.assigned), engine.assigned  # both replicas sampled
    assert engine.failed == {}
    steps = {r["step"]: r["metrics"] for r in read_metrics(job_dir)}
    assert sorted(steps) == [0, 1, 2, 3]
    assert all(steps[s]["train/trainable_rows"] > 0 for s in (1, 2, 3))
    # three updates, each loaded by both replicas before the version moved
    assert engine.weight_version == 3 and [r.weight_version for r in engine.replicas] == [3, 3]
    for s in (2, 3):  # sampled ahead while the previous step trained: 0 or 1 version old
        assert steps[s]["fully_async/staleness/max"] in (0.0, 1.0)
        shares = [v for k, v in steps[s].items() if k.startswith("fully_async/token_share/")]
        assert sum(shares) == pytest.approx(1.0)
    assert steps[3]["trace/success_rate/agent"] == 1.0
