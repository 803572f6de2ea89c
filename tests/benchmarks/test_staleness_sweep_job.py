"""``staleness_sweep.py --task multistep`` trains the multistep template's job as shipped,
with only the sweep's mode, seed, steps and validation interval changed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import staleness_sweep

from rltune.templates import TEMPLATES_DIR


def test_the_multistep_sweep_job_is_the_templates_with_the_sweeps_changes(tmp_path):
    extra = {**staleness_sweep.MODES["stale2p"], "seed": 5, "learning_rate": 3e-4}
    ws = staleness_sweep.make_multistep_job(tmp_path, "/models/m", 20, 4, extra)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    shipped = yaml.safe_load((TEMPLATES_DIR / "multistep" / "job.yaml").read_text())
    hp, want = job["training"]["hyper_parameters"], shipped["training"]["hyper_parameters"]
    changed = {k for k in hp.keys() | want.keys() if hp.get(k) != want.get(k)}
    assert changed <= {"max_steps", "eval_steps", "save_strategy", "save_steps",
                       "save_total_limit", "max_staleness", "partial_rollouts", "seed",
                       "learning_rate"}
    assert (hp["max_steps"], hp["eval_steps"], hp["max_staleness"], hp["partial_rollouts"],
            hp["seed"]) == (20, 4, 2, True, 5)
    assert job["model"]["name"] == "/models/m"
    assert job["functions"] == shipped["functions"]
    lines = (ws / "data" / "train.jsonl").read_text().splitlines()
    assert len(lines) == 20 * 8 and len((ws / "data" / "val.jsonl").read_text().splitlines()) == 64


def test_adam_beta1_sets_the_first_moment_decay_of_every_policy_optimizer(monkeypatch):
    import torch

    import rltune.trainer.update as update
    from rltune.config.hyperparams import HyperParameters

    monkeypatch.setattr(update, "build_optimizer", update.build_optimizer)  # restored after
    staleness_sweep.set_adam_beta1(0.5)
    opt = update.build_optimizer(torch.nn.Linear(3, 2), HyperParameters())
    assert {g["betas"] for g in opt.param_groups} == {(0.5, 0.999)}


async def test_answer_anywhere_restores_the_reward_that_pays_for_trailing_text(
        tmp_path, workspace_reward):
    from async_compare import make_job

    from rltune.sdk import AgentOutput, RewardInput
    from rltune.sdk.processors import call_process

    ws = make_job(tmp_path, "/models/m", 2, 1, {})

    async def score(text):
        data = RewardInput(ground_truth="7", agent_output=AgentOutput(
            messages=[{"role": "assistant", "content": text}]))
        reward = workspace_reward(ws, "CalcReward")  # the file as it is now
        return (await call_process(reward, data)).reward.reward_score

    assert await score("### ANSWER: 7 ### ### ###") == 0.0  # the template's reward
    staleness_sweep.answer_anywhere_reward(ws)
    assert await score("### ANSWER: 7 ###") == 1.0
    assert await score("### ANSWER: 7 ### ### ###") == 1.0  # the reward before session 22
    with pytest.raises(SystemExit, match="no answer_at_end"):
        staleness_sweep.answer_anywhere_reward(ws)  # already changed: refused, not silent
