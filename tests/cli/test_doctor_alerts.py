"""The training doctor through the CLI: ``rltune train`` prints each alert as it happens and
ends at a ``max_tokens`` budget with a checkpoint; ``rltune doctor RUN_DIR`` lists the alerts."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from rltune.cli.main import app

runner = CliRunner()


def tiny_workspace(tmp_path, model_dir, *, train_rows: int, val_rows: int,
                   advisor: dict | None = None, **hp):
    """The calc template on the tiny model, 2 prompts x 2 rollouts a step, one epoch."""
    ws = tmp_path / "agent"
    assert runner.invoke(app, ["init", "workspace", str(ws), "--train-rows", str(train_rows),
                               "--val-rows", str(val_rows)]).exit_code == 0
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    job["training"]["hyper_parameters"].update(
        batch_size=2, n_rollouts=2, ppo_mini_batch_size=4, max_length=200,
        max_prompt_length=180, n_epochs=1, stop_at_validation_reward=None, **hp)
    if advisor:
        job["advisor"] = advisor
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def test_train_prints_alerts_stops_at_the_token_budget_and_doctor_lists_them(
    tmp_path, tiny_model_dir
):
    # max_tokens 1 is spent by the first step: the job ends there, checkpointed. The untrained
    # tiny model never stops within 20 tokens: every answer is cut (P9).
    ws = tiny_workspace(tmp_path, tiny_model_dir, train_rows=6, val_rows=2, eval_steps=1,
                        max_tokens=1, advisor={"thresholds": {"P9": {"window": 1}}})
    out = tmp_path / "out"
    res = runner.invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(out)])
    assert res.exit_code == 0, res.output
    assert "doctor: step 1 [P9] high truncation rate" in res.output
    assert '"steps": 1' in res.output and "max_tokens 1 reached at step 1" in res.output
    summary = json.loads(res.output[res.output.index("{"):res.output.index("\noutputs:")])
    assert summary["stopped_by_budget"]["budget"] == "max_tokens"
    assert [p.rsplit("-", 1)[1] for p in summary["checkpoints"]] == ["1"]
    assert "max_tokens 1 reached at step 1" in (out / "train.log").read_text()

    doc = runner.invoke(app, ["doctor", str(out)])
    assert doc.exit_code == 3, doc.output
    assert "[P9]" in doc.output and "max_length +2048" in doc.output
    listed = json.loads(runner.invoke(app, ["doctor", str(out), "--json"]).output)
    assert listed[0]["code"] == "P9" and listed[0]["step"] == 1
    missing = runner.invoke(app, ["doctor", "ft-000000000000"])
    assert missing.exit_code == 4 and "no job or run folder" in missing.output, missing.output


def test_doctor_replays_the_metrics_of_a_run_without_alerts(tmp_path):
    rows = [{"step": i, "time": 0, "metrics": {"trajectory/response_length/clip_ratio": 0.9}}
            for i in range(1, 5)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = runner.invoke(app, ["doctor", str(tmp_path)])
    assert res.exit_code == 3 and "step 3 [P9]" in res.output, res.output
