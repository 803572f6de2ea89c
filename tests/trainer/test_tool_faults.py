"""A tool that fails or hangs fails its rollout with the reason, the rollout is retried as
configured (``max_rollout_retries``), and the step goes on: real worker processes, gateway and
engine on the untrained tiny model. Nothing is lost or counted twice: every rollout of every
step is written once, with its attempts and error."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

FIXTURES = Path(__file__).parent / "fixtures"
TIMEOUT_S = 3.0


def tool_workspace(tmp_path: Path, model_dir: Path, **hp) -> Path:
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=3, val_rows=2)
    # ground truths 3, 4, 5: one prompt of each tool behaviour (validation: a tool that works)
    for name, truths in (("train", ["3", "4", "5"]), ("val", ["5", "5"])):
        path = ws / "data" / f"{name}.jsonl"
        rows = [json.loads(x) for x in path.open()]
        for row, truth in zip(rows, truths, strict=True):
            row["ground_truth"] = truth
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copytree(FIXTURES / "toolws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    rollout = job["functions"][0]
    rollout["fcmodel"]["classpath"] = "functions/flaky_tool.py:FlakyToolRollout"
    rollout["timeout"] = TIMEOUT_S
    job["training"]["hyper_parameters"].update({
        **QUICK_HYPER_PARAMETERS, "batch_size": 3, "n_rollouts": 2, "max_steps": 2,
        "eval_steps": 2, "save_strategy": "no", "max_rollout_retries": 1,
        "max_failed_step_share": 1.0, **hp})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


@pytest.mark.parametrize("max_staleness", [
    pytest.param(0, marks=pytest.mark.slow), 2], ids=["sync", "stream"])
async def test_a_failing_or_hanging_tool_fails_its_rollout_and_never_stalls_a_step(
        tmp_path, tiny_model_dir, max_staleness):
    ws = tool_workspace(tmp_path, tiny_model_dir, max_staleness=max_staleness)
    job_dir = tmp_path / "job"
    t0 = time.monotonic()
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    # a hung tool costs one timeout per step (its retry answers), never an open-ended wait
    assert time.monotonic() - t0 < 120
    steps = {r["step"]: r["metrics"] for r in read_metrics(job_dir)}
    assert sorted(steps) == [0, 1, 2]
    seen: set[str] = set()
    for step in (1, 2):
        records = [json.loads(x) for x in
                   (job_dir / "trajectories" / f"step_{step:06d}.jsonl").open()]
        assert len(records) == 3 * 2  # batch_size x n_rollouts, each once
        for rec in records:
            key = f"{rec['sample_id']}/{rec['rollout_id'].rsplit('.a', 1)[0]}"
            assert key not in seen, key  # no rollout counted twice
            seen.add(key)
            kind = int(float(_truth(ws, rec["row_index"]))) % 3
            if kind == 0:  # the tool raised on every attempt: dropped with its reason
                assert rec["status"] == "failed"
                assert rec["error"] == "tool failed: search service answered 503"
                assert rec["attempts"] == 2
            elif kind == 1:  # hung, timed out, retried, answered
                assert rec["status"] == "success", rec["error"]
                assert rec["attempts"] == 2
            else:
                assert rec["status"] == "success" and rec["attempts"] == 1
        m = steps[step]
        failed = sum(1 for r in records if r["status"] == "failed")
        assert m["train/dropped_rollouts"] == failed
    log = (job_dir / "train.log").read_text()
    assert "dropped: tool failed: search service answered 503" in log


def _truth(ws: Path, row_index: int) -> str:
    rows = [json.loads(x) for x in (ws / "data" / "train.jsonl").open()]
    return str(rows[row_index]["ground_truth"])
