"""The evaluation process (``python -m rltune.lifecycle.evaluate``, what the server starts for
``POST /v1/evaluations``) on the nano calculator agent: the job's real engine, gateway and
function workers sample and score every prompt, and ``result.json`` adds up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rltune.models.recipes import recipe_for
from rltune.models.tasks import make_dataset_rows, write_jsonl
from rltune.templates import TEMPLATES_DIR

pytest.importorskip("torch")

N_PROMPTS, N = 6, 2


def test_evaluation_process_scores_every_sample(tmp_path: Path, nano_model_dir: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    task = recipe_for("nano").config.task
    write_jsonl(make_dataset_rows(N_PROMPTS, "heldout", seed=0, config=task), ws / "eval.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(nano_model_dir)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    root = tmp_path / "eval"
    root.mkdir()
    (root / "spec.json").write_text(json.dumps({
        "config": str(ws / "job.yaml"), "base_dir": str(ws), "dataset": str(ws / "eval.jsonl"),
        "n": N, "k": 2, "threshold": 1.0,
        "models": [{"label": "base", "path": str(nano_model_dir)}]}))

    proc = subprocess.run([sys.executable, "-m", "rltune.lifecycle.evaluate", str(root)],
                          env={**os.environ, "RLTUNE_HOME": str(tmp_path / "home")},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((root / "status.json").read_text()) == {"status": "SUCCEEDED"}
    result = json.loads((root / "result.json").read_text())
    [model] = result["models"]
    assert model["model"] == "base" and result["prompts"] == N_PROMPTS
    assert len(model["per_prompt"]) == N_PROMPTS
    assert all(len(p["rewards"]) == N for p in model["per_prompt"])
    # every rollout ran and was scored by the job's reward (a broken runtime shows as failed)
    assert model["failed"] == 0.0, (root / "eval.log").read_text()
    rewards = [r for p in model["per_prompt"] for r in p["rewards"]]
    assert all(r in (0.0, 1.0) for r in rewards), rewards  # the calc reward: exact answer
    assert model["mean@1"] == pytest.approx(sum(rewards) / len(rewards))
    assert [row["models"]["base"]["rewards"] for row in result["per_prompt"]] == [
        p["rewards"] for p in model["per_prompt"]]
    assert "base: mean@1" in (root / "eval.log").read_text()
