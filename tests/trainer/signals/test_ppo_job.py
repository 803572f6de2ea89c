"""A PPO job end to end on the untrained tiny model: critic warm-up, critic metrics, the
critic saved in every checkpoint and restored on resume (the learning test is in
test_learning.py, ``-m slow``)."""

from __future__ import annotations

import torch
import yaml

from rltune.config import load_job_config
from rltune.jobdir import CRITIC_STATE
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS


async def test_a_ppo_job_warms_up_its_critic_and_resumes_it(tmp_path, tiny_model_dir):
    ws = create_workspace(tmp_path / "ws", train_rows=12, val_rows=4)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update(
        QUICK_HYPER_PARAMETERS, algorithm="ppo", max_steps=3, n_rollouts=1,
        critic_warmup_steps=1, eval_steps=3)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    cfg = load_job_config(ws / "job.yaml")
    summary = await Trainer(cfg, job_dir=job_dir, base_dir=ws).run()
    rows = {r["step"]: r["metrics"] for r in read_metrics(job_dir)}
    assert rows[1]["critic/warmup"] == 1.0 and "actor/pg_loss" not in rows[1]
    assert rows[2]["critic/warmup"] == 0.0 and "actor/pg_loss" in rows[2]
    for key in ("critic/vf_loss", "critic/vpred_mean", "critic/vf_explained_var",
                "critic/vf_clipfrac", "critic/grad_norm"):
        assert key in rows[3], key
    assert "critic warm-up 1/1" in (job_dir / "train.log").read_text()
    ckpt = job_dir / "checkpoints" / "checkpoint-2"
    saved = torch.load(ckpt / CRITIC_STATE, weights_only=False)
    assert saved["steps"] == 2
    assert len(summary["checkpoints"]) == 3

    trainer = Trainer(cfg, job_dir=job_dir, base_dir=ws)
    resumed = await trainer.run(resume_from=ckpt)
    assert resumed["steps"] == 1
    assert trainer.signal.critic.steps == 3  # 2 restored + the replayed step 3
