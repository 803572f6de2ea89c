"""SFT → DPO → RL chained by ``model:``, as the clouds chain them: each job's checkpoint is the
next job's model (the DPO job is an Ark DPOLoRA job.yaml), on the untrained tiny model, one or
two steps each (the real Trainer, engine, gateway and function pools). The learning claim is
the slow test in test_learning_dpo.py."""

from __future__ import annotations

from pathlib import Path

import yaml

from rltune.config import load_job_config
from rltune.jobdir import complete_checkpoints
from rltune.models.tasks import CALCULATOR_TOOL, TaskConfig, write_jsonl
from rltune.models.transcripts import make_transcripts, preference_rows
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

HP = {"batch_size": 2, "max_steps": 2, "learning_rate": 1e-3, "max_length": 256,
      "max_prompt_length": 128, "eval_steps": 2, "save_strategy": "steps", "save_steps": 2,
      "save_total_limit": 1}


ARK_DPO = """
name: calc-dpo
customization_type: DPOLoRA
model_reference: {{foundation_model: {{name: '{model}'}}}}
hyperparameters: {{batch_size: '2', lr: '0.001', num_steps: '2', seq_len: '256',
  dpo_beta: '0.1', save_every_n_steps: '2', test_every_n_steps: '2'}}
data:
  training_set: {{local_files: [./train.jsonl]}}
  validation_set: {{local_files: [./val.jsonl]}}
"""


def _offline_job(ws: Path, model: Path | str, algorithm: str, rows: list[dict]) -> Path:
    ws.mkdir(parents=True)
    write_jsonl(rows[:-2], ws / "train.jsonl")
    write_jsonl(rows[-2:], ws / "val.jsonl")
    job = {"model": str(model),
           "datasets": [{"type": "training", "file_name": "train.jsonl"},
                        {"type": "validation", "file_name": "val.jsonl"}],
           "training": {"hyper_parameters": {"algorithm": algorithm, **HP}}}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def _rl_workspace(ws: Path, model: Path) -> Path:
    create_workspace(ws, train_rows=4, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model)
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, "max_steps": 1})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def _run(ws: Path, job_dir: Path) -> Path:
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir,
                            base_dir=ws).run()
    assert summary["steps"] == 2, summary
    return complete_checkpoints(job_dir / "checkpoints")[-1]


async def test_sft_then_dpo_then_rl_by_model(tmp_path, tiny_model_dir):
    task = TaskConfig(digits=1)
    sft_rows = [{"messages": conv, "tools": [CALCULATOR_TOOL]}
                for conv in make_transcripts(6, 1, config=task)]
    sft_model = await _run(_offline_job(tmp_path / "sft", tiny_model_dir, "sft", sft_rows),
                           tmp_path / "sft-job")

    # the DPO job is Volcano Ark's DPOLoRA job.yaml (LoRA adapters, the base as reference)
    dpo_ws = tmp_path / "dpo"
    _offline_job(dpo_ws, sft_model, "dpo", preference_rows(6, seed=1, config=task))
    (dpo_ws / "job.yaml").write_text(ARK_DPO.format(model=sft_model))
    dpo_model = await _run(dpo_ws, tmp_path / "dpo-job")
    rows = read_metrics(tmp_path / "dpo-job")
    assert [r["step"] for r in rows] == [0, 1, 2]  # validation before training, two steps
    first, last = rows[0]["metrics"], rows[-1]["metrics"]
    assert abs(first["validation/dpo/reward_margin"]) < 1e-4  # the SFT model is the reference
    for name in ("dpo/loss", "dpo/accuracy", "dpo/reward_margin", "validation/dpo/accuracy"):
        assert name in last, name
    assert last["validation/dpo/reward_margin"] != first["validation/dpo/reward_margin"]
    log = (tmp_path / "dpo-job" / "train.log").read_text()
    assert "LoRA rank 16" in log and "reference = adapters disabled" in log

    rl = _rl_workspace(tmp_path / "rl", dpo_model)
    summary = await Trainer(load_job_config(rl / "job.yaml"), job_dir=tmp_path / "rl-job",
                            base_dir=rl).run()
    assert summary["steps"] == 1
    assert str(dpo_model) in (tmp_path / "rl-job" / "train.log").read_text()
