"""A job whose steps have no successful rollout leaves no checkpoint: the model never changed
(issue 30, item 17)."""

from __future__ import annotations

import pytest
import yaml

from rltune.config import load_job_config
from rltune.sdk.errors import TrainingFailedError
from rltune.trainer.loop import Trainer
from trainer.test_loop import make_workspace  # tests/trainer/test_loop.py

ALWAYS_NAN = '''
from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput


class AlwaysNaN(AbstractRewardProcessor):
    def process(self, input_data: RewardInput) -> RewardOutput:
        return RewardOutput(reward=Reward(reward_score=float("nan")))
'''


async def test_an_all_failed_job_saves_no_checkpoint(tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="steps", save_steps=1,
                        max_failed_step_share=0.4, stop_at_validation_reward=None)
    (ws / "functions" / "always_nan.py").write_text(ALWAYS_NAN)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["datasets"] = [d for d in job["datasets"] if d["type"] == "training"]
    reward = next(f for f in job["functions"] if f["type"] == "reward")
    reward["fcmodel"]["classpath"] = "functions/always_nan.py:AlwaysNaN"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    with pytest.raises(TrainingFailedError):
        await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    assert sorted(p.name for p in (job_dir / "checkpoints").glob("checkpoint-*")) == []
    assert "no checkpoint at step 1" in (job_dir / "train.log").read_text()
