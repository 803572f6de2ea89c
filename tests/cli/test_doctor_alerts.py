"""The training doctor through the CLI: ``rltune train`` prints each alert as it happens and
ends at a ``max_tokens`` budget with a checkpoint; ``rltune doctor RUN_DIR`` lists the alerts."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from rltune.cli.main import app

runner = CliRunner()


def test_train_prints_alerts_stops_at_the_token_budget_and_doctor_lists_them(
    tmp_path, tiny_model_dir
):
    ws = tmp_path / "agent"
    assert runner.invoke(app, ["init", "workspace", str(ws), "--train-rows", "6",
                               "--val-rows", "2"]).exit_code == 0
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update(
        batch_size=2, n_rollouts=2, ppo_mini_batch_size=4, max_length=200,
        max_prompt_length=180, stop_at_validation_reward=None, eval_steps=1,
        max_tokens=1,  # spent by the first step: the job ends there, checkpointed
    )
    # the untrained tiny model never stops within 20 tokens: every answer is cut (P9)
    job["advisor"] = {"thresholds": {"P9": {"window": 1}}}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
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
    assert missing.exit_code == 2 and "no job or run folder" in missing.output


def test_doctor_replays_the_metrics_of_a_run_without_alerts(tmp_path):
    rows = [{"step": i, "time": 0, "metrics": {"trajectory/response_length/clip_ratio": 0.9}}
            for i in range(1, 5)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = runner.invoke(app, ["doctor", str(tmp_path)])
    assert res.exit_code == 3 and "step 3 [P9]" in res.output, res.output
