"""``agentic_compare.py``'s arguments: a knob of one task is refused for the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "agentic_compare.py"


@pytest.mark.parametrize("args", [["--task", "calc", "--val-rows", "8"],
                                  ["--task", "multihop", "--val-rows", "8"],
                                  ["--task", "multistep", "--val-rows", "0"]])
def test_val_rows_is_refused_off_multistep_and_below_one(args):
    run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert "--val-rows takes a positive number of held-out chains" in run.stderr


def test_scale_lr_by_staleness_reaches_the_async_sides_jobs_only(tmp_path):
    """``--scale-lr-by-staleness`` puts the key in the async sides' job.yaml, which loads; the
    synchronous side (which would refuse it) runs without."""
    import yaml

    sys.path.insert(0, str(SCRIPT.parent))
    import agentic_compare
    from _multistep_bench import spec_fields
    from async_compare import pipeline_knobs

    from rltune.config import load_job_config

    spec = {"task": "multistep", "model": "/models/m", "steps": 4, "eval_steps": 2,
            "tool_url": "http://127.0.0.1:9", "batch_size": 8, "n_rollouts": 8, "seed": 3,
            "scale_lr_by_staleness": True, **spec_fields()}
    for side in agentic_compare.SIDES:
        ws = agentic_compare.agentic_job(tmp_path / side, spec,
                                         pipeline_knobs(side, scale_lr_by_staleness=True))
        hp = yaml.safe_load((ws / "job.yaml").read_text())["training"]["hyper_parameters"]
        assert hp.get("scale_lr_by_staleness", False) is (side != "sync")
        assert load_job_config(ws / "job.yaml").training.hyper_parameters \
            .scale_lr_by_staleness is (side != "sync")
    assert "scale_lr_by_staleness" not in pipeline_knobs("stale2p")


def test_report_of_a_missing_runs_file_is_refused_by_name(tmp_path):
    missing = tmp_path / "run.runs.jsonl"
    run = subprocess.run([sys.executable, str(SCRIPT), "--report", str(missing)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert f"--report {missing}: no such file" in run.stderr
