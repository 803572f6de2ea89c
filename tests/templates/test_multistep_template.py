"""The ``multistep`` workspace template: its data, its reward, and (slow) that it learns."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from rltune.config import load_job_config
from rltune.models.multistep import MultiStepTask, multistep_row, multistep_transcript
from rltune.sdk import AgentOutput, RewardInput
from rltune.sdk.data import RequestMetadata, validation_sample_id
from rltune.templates import TEMPLATES_DIR, available, create_workspace


def test_the_workspace_has_chains_the_job_loads_and_it_names_the_multistep_model(tmp_path):
    assert "multistep" in available()
    ws = create_workspace(tmp_path / "ws", "multistep", train_rows=16, val_rows=8)
    rows = [json.loads(x) for x in (ws / "data" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and rows[0]["messages"][1]["content"].startswith("Start with ")
    assert all(r["rollout_extra"]["steps"][-1] == r["rollout_extra"]["solution"] for r in rows)
    job = load_job_config(ws / "job.yaml")
    assert job.model.name == "nano-multistep"


@pytest.mark.parametrize("phase", ["train", "test"])
async def test_partial_credit_counts_in_training_only(phase, workspace_reward):
    from rltune.sdk.processors import call_process

    task = MultiStepTask(17, (("+", 25), ("*", 3), ("-", 9)))
    full = multistep_transcript(task)
    two_right = [*full[:7], {"role": "assistant", "content": "### ANSWER: 126 ###"}]
    sample = validation_sample_id("j", 0) if phase == "test" else "j-s1-p0"
    reward = workspace_reward(TEMPLATES_DIR / "multistep", "MultiStepReward")

    async def score(messages):
        meta = RequestMetadata(job_id="j", sample_id=sample, rollout_id="r", attempt_id="a")
        output = AgentOutput(messages=messages, rollout_extra=multistep_row(task)["rollout_extra"])
        data = RewardInput(ground_truth=task.answer, request_metadata=meta, agent_output=output)
        return (await call_process(reward, data)).reward

    trailed = [*full[:-1], {"role": "assistant", "content": "### ANSWER: 117 ### ### ###4"}]
    right, partial, rambling = await score(full), await score(two_right), await score(trailed)
    assert right.reward_metrics == {"correct": 1.0, "steps_right": 1.0}
    # the right number with text after it: every call right, the answer not (it must end)
    assert rambling.reward_metrics == {"correct": 0.0, "steps_right": 1.0}
    assert partial.reward_metrics == {"correct": 0.0, "steps_right": pytest.approx(2 / 3)}
    if phase == "train":
        assert right.reward_score == pytest.approx(1.5)
        assert partial.reward_score == pytest.approx(0.5 * 2 / 3)
        assert rambling.reward_score == pytest.approx(0.5)
    else:  # validation: the exact final answer only
        assert (right.reward_score, partial.reward_score, rambling.reward_score) == (1, 0, 0)


@pytest.mark.slow  # ~25 min on 2 cores: the build of nano-multistep (4.4 min), then 150 steps
@pytest.mark.e2e
@pytest.mark.xfail(strict=False, reason="measured +0.25, +0.26, +0.18, +0.23 (AVX2) with the "
                   "answer at the end, +0.26, +0.23, +0.23, +0.12 before: +0.25 in 3 runs of 8 "
                   "on the lookback-gain-0.05 build; +0.29 in the first run on the gain-0.2 "
                   "build; benchmarks/RESULTS.md, the answer must end, lookback gain 0.2")
async def test_the_template_raises_exact_answer_validation_by_0_25(
        tmp_path, nano_model_dir):
    """What ``make demo-agent`` does, from a cached nano: build nano-multistep, train the
    template's job as shipped; the validation (exact final answer) must rise by 0.25. The
    target is within 20 minutes on 2 cores: the time is printed, not asserted."""
    import shutil

    from rltune.models.registry import ensure_demo_model
    from rltune.paths import models_home
    from rltune.trainer.loop import Trainer

    t0 = time.monotonic()
    home = tmp_path / "home"
    shutil.copytree(nano_model_dir, models_home(home) / "nano")  # the cached base
    model = ensure_demo_model("nano", home=home, task="multistep")
    ws = create_workspace(tmp_path / "ws", "multistep", train_rows=1024)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws)
    summary = await trainer.run()
    took = time.monotonic() - t0
    before, values = summary["initial_validation"], [v for _, v in summary["validation"]]
    # The wall-clock is reported, never asserted (benchmarks/RESULTS.md has the figures).
    print("multistep", before, values, f"{took:.0f} s")
    assert values[-1] - before >= 0.25, (before, values)
