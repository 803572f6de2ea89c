"""DPO learns on the warm-started nano calculator agent (``-m slow``): a DPO job on generated
preference pairs (chosen: the correct calculator use; rejected: a guess or the tool on a wrong
expression) raises the chosen-over-rejected preference on held-out pairs, and the calculator
reward of the model it produces (measured as the validation before training of an RL job
started from it with ``model:``, against the same measurement on the nano model itself).

Run it also under ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` (older CPU kernels).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.jobdir import complete_checkpoints
from rltune.models.recipes import recipe_for
from rltune.models.tasks import make_dataset_rows, write_jsonl
from rltune.models.transcripts import preference_rows
from rltune.templates import TEMPLATES_DIR
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics

pytestmark = [pytest.mark.slow]

DPO_STEPS = 24


def _dpo_workspace(root: Path, model_dir: Path) -> Path:
    ws = root / "dpo"
    ws.mkdir()
    task = recipe_for("nano").config.task
    write_jsonl(preference_rows(DPO_STEPS * 8, "train", seed=1, config=task),
                ws / "train.jsonl")
    write_jsonl(preference_rows(48, "heldout", seed=0, config=task), ws / "val.jsonl")
    job = {"model": str(model_dir),
           "datasets": [{"type": "training", "file_name": "train.jsonl"},
                        {"type": "validation", "file_name": "val.jsonl"}],
           "training": {"hyper_parameters": {
               # without the NLL term the pairs are learned but the reward falls (docs)
               "algorithm": "dpo", "batch_size": 8, "learning_rate": 1e-4, "dpo_beta": 0.5,
               "dpo_nll_weight": 1.0,
               "max_steps": DPO_STEPS, "max_length": 256, "max_prompt_length": 200,
               "eval_steps": DPO_STEPS // 2, "save_strategy": "steps", "save_steps": DPO_STEPS,
               "save_total_limit": 1, "seed": 3}}}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def _calculator_reward(root: Path, model_dir: Path, name: str) -> float:
    """The validation reward (mean@1 over 4 rollouts of 60 held-out questions) an RL job
    measures before its first step, for the model at ``model_dir``."""
    ws = root / f"rl-{name}"
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    task = recipe_for("nano").config.task
    write_jsonl(make_dataset_rows(2, "train", seed=1, config=task), ws / "data" / "train.jsonl")
    write_jsonl(make_dataset_rows(60, "heldout", seed=0, config=task), ws / "data" / "val.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    job["training"]["hyper_parameters"] = {
        "algorithm": "grpo", "batch_size": 2, "n_rollouts": 2, "learning_rate": 0.0,
        "max_steps": 1, "kl_loss_coef": 0.0, "max_length": 256, "max_prompt_length": 200,
        "eval_steps": 10, "val_n_rollouts": 4, "save_strategy": "no", "seed": 3}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=root / f"job-{name}",
                            base_dir=ws).run()
    return float(summary["initial_validation"])


async def test_dpo_raises_the_preference_and_the_calculator_reward(tmp_path, nano_model_dir):
    ws = _dpo_workspace(tmp_path, nano_model_dir)
    job_dir = tmp_path / "job-dpo"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    val = [r["metrics"] for r in read_metrics(job_dir) if "validation/dpo/loss" in r["metrics"]]
    print("dpo validation", [(round(v["validation/dpo/accuracy"], 3),
                              round(v["validation/dpo/reward_margin"], 3)) for v in val])
    assert abs(val[0]["validation/dpo/reward_margin"]) < 1e-4  # the policy starts as reference
    assert val[-1]["validation/dpo/accuracy"] >= 0.75, val[-1]
    assert val[-1]["validation/dpo/reward_margin"] > 0.5, val[-1]
    assert val[-1]["validation/dpo/loss"] < val[0]["validation/dpo/loss"] - 0.2

    dpo_model = complete_checkpoints(job_dir / "checkpoints")[-1]
    before = await _calculator_reward(tmp_path, nano_model_dir, "nano")
    after = await _calculator_reward(tmp_path, dpo_model, "dpo")
    print("calculator reward", before, "->", after)
    assert after >= before + 0.15, (before, after)
