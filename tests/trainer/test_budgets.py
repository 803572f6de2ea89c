"""``max_wall_time`` ends a job at the step boundary past it, with a checkpoint and the reason
in the summary (``max_tokens`` is covered through the CLI in tests/cli/test_doctor_alerts.py)."""

from __future__ import annotations

import pytest
from test_loop import make_workspace

from rltune.config import load_job_config
from rltune.trainer.loop import Trainer


async def test_max_wall_time_ends_the_job_at_a_step_boundary_with_a_checkpoint(
    tmp_path, tiny_model_dir
):
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=1, save_strategy="no",
                        max_wall_time=0.001)
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws)
    assert trainer.total_steps == 6
    summary = await trainer.run()
    assert summary["steps"] == 1 and summary["checkpoints"] == []  # save_strategy no
    budget = summary["stopped_by_budget"]
    assert (budget["budget"], budget["step"], budget["limit"]) == ("max_wall_time", 1, 0.001)
    assert "max_wall_time 0.001 reached at step 1" in (tmp_path / "job" / "train.log").read_text()


@pytest.mark.parametrize("knob, value", [("max_wall_time", 0), ("max_tokens", 0)])
def test_budgets_must_be_positive(knob, value):
    from pydantic import ValidationError

    from rltune.config import HyperParameters

    with pytest.raises(ValidationError, match=knob):
        HyperParameters(**{knob: value})
