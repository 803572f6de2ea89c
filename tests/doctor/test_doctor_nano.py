"""The doctor on real failures of the warm-started nano calculator agent: each job is made to
fail one way and must raise its code in ``alerts.jsonl`` (the REST route and the console read
that file: tests/console/test_console_doctor.py). Each run is a few small steps (~1 min on the
loaded 2-core box), so they are ``slow``; the healthy run is the GSPO learning test
(tests/trainer/test_learning.py asserts it raises no alert)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.doctor import read_alerts
from rltune.models.recipes import recipe_for
from rltune.models.tasks import make_dataset_rows, write_jsonl
from rltune.templates import TEMPLATES_DIR
from rltune.trainer.loop import Trainer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LENGTH_REWARD = '''
from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput


class LengthReward(AbstractRewardProcessor):
    """Pays for length: the longer the conversation's assistant text, the higher the reward."""

    def process(self, input_data: RewardInput) -> RewardOutput:
        text = "".join(str(m.get("content") or "") for m in input_data.agent_output.messages
                       if m.get("role") == "assistant")
        return RewardOutput(reward=Reward(reward_score=min(1.0, len(text) / 300)))
'''


async def run_job(tmp_path: Path, model_dir: Path, *, train_rows: int = 64, val_rows: int = 0,
                  distinct: int | None = None, advisor: dict | None = None,
                  reward: str | None = None, **hp) -> list[str]:
    """A calc job on nano with ``hp`` over a small quick base; returns the alert codes."""
    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    task = recipe_for("nano").config.task
    rows = make_dataset_rows(distinct or train_rows, "train", seed=1, config=task)
    rows = (rows * train_rows)[:train_rows]  # a few prompts repeated when distinct is small
    write_jsonl(rows, ws / "data" / "train.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    if val_rows:
        write_jsonl(make_dataset_rows(val_rows, "heldout", seed=0, config=task),
                    ws / "data" / "val.jsonl")
    else:
        job["datasets"] = [d for d in job["datasets"] if d["type"] == "training"]
    for fn in job["functions"]:  # a function of an earlier job in this process is not reused
        fn["name"] = f"{fn['name']}-{tmp_path.name}"[:60]
    if reward:
        # its own module name: the reward module of an earlier job may still be imported
        (ws / "functions" / "length_reward.py").write_text(reward)
        job["functions"][1]["fcmodel"]["classpath"] = "functions/length_reward.py:LengthReward"
    job["training"]["hyper_parameters"] = {
        "algorithm": "gspo", "batch_size": 4, "n_rollouts": 4, "learning_rate": 2e-4,
        "ppo_mini_batch_size": 16, "kl_loss_coef": 0.0, "max_length": 256,
        "max_prompt_length": 200, "eval_steps": 2, "val_n_rollouts": 1, "save_strategy": "no",
        "seed": 3, **hp,
    }
    if advisor:
        job["advisor"] = advisor
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    alerts = read_alerts(job_dir)
    print([a.line() for a in alerts])
    return [a.code for a in alerts]


async def test_a_learning_rate_far_too_high_explodes_the_kl_or_collapses_entropy(
        tmp_path, nano_model_dir):
    """Measured: the reward falls 0.62 -> 0 after the first update and the answers run to
    max_length. When a later step still has a reward to learn from, its update's KL to the
    reference is ~4.8 (entropy 0.1 -> 5.4): P3. Often no step has one (every group scores 0,
    so nothing updates and no KL is logged) and the doctor sees the broken policy as P9."""
    codes = await run_job(tmp_path, nano_model_dir, max_steps=6, learning_rate=3e-3,
                          kl_loss_coef=0.001)
    assert {"P3", "P4", "P9"} & set(codes), codes


async def test_a_max_length_that_cuts_most_answers_raises_p9(tmp_path, nano_model_dir):
    codes = await run_job(tmp_path, nano_model_dir, max_steps=3, max_length=208)
    assert "P9" in codes, codes


# Sampling is not reproducible run to run (rollouts race through the engine), and these two
# small jobs end differently: each raised its code in 2 of 4 runs on the 2-core box.
NOT_REPRODUCIBLE = pytest.mark.xfail(strict=False, reason="the small job does not always fail "
                                     "this way (2 of 4 runs did)")


@NOT_REPRODUCIBLE
async def test_a_reward_that_pays_for_length_raises_hack_length(tmp_path, nano_model_dir):
    codes = await run_job(tmp_path, nano_model_dir, max_steps=4, learning_rate=1e-3,
                          reward=LENGTH_REWARD, advisor={"thresholds": {"hack/length": {
                              "window": 4, "warmup": 0}}})
    assert "hack/length" in codes, codes


@NOT_REPRODUCIBLE
async def test_two_prompts_repeated_overfit_p6_or_oscillate_p2(tmp_path, nano_model_dir):
    """Two questions repeated at lr 5e-4. Measured (the runs differ): the training reward rises
    while the held-out validation falls (P6, with hack/mode-collapse), or the training reward
    swings 0.31, 0.50, 0.19, 0.56, 0.94, 0.69, 0.88, 0.06 while validation rises (P2)."""
    codes = await run_job(tmp_path, nano_model_dir, max_steps=8, distinct=2, val_rows=16,
                          learning_rate=5e-4, eval_steps=2)
    assert {"P6", "P2"} & set(codes), codes
