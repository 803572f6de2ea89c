"""The job folder: one object names every file of a run; the writers and readers agree on it,
and a checkpoint's trainer state is read without torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rltune.jobdir import JobDir, complete_checkpoints, read_trainer_state
from rltune.sdk.errors import ValidationError


def test_the_sink_writes_where_the_job_folder_says_and_the_server_reads_it(tmp_path):
    from rltune.server.jobdata import metric_series, read_progress, trajectory_steps
    from rltune.trainer.sink import FileSink

    files = JobDir(tmp_path)
    sink = FileSink(tmp_path)
    sink.metrics(2, {"critic/rewards/mean": 0.5})
    sink.trajectories(2, [{"rollout_id": "r1", "reward": 1.0}])
    sink.progress({"step": 2})
    sink.log("hello")
    sink.close()
    assert files.metrics.is_file() and files.trajectory(2).is_file()
    assert files.progress.is_file() and "hello" in files.log.read_text()
    assert metric_series(tmp_path) == {"critic/rewards/mean": [[2, 0.5]]}
    assert read_progress(tmp_path) == {"step": 2}
    assert trajectory_steps(tmp_path) == [{"step": 2, "count": 1}]
    assert json.loads(files.trajectory(2).read_text())["rollout_id"] == "r1"


def test_complete_checkpoints_and_the_trainer_state(tmp_path):
    from rltune.server.jobdata import list_checkpoints

    files = JobDir(tmp_path)
    for step in (10, 2):
        files.checkpoint(step).mkdir(parents=True)
        (files.checkpoint(step) / "trainer_state.json").write_text(
            json.dumps({"step": step, "validation_reward": step / 10}))
    files.checkpoint(30).mkdir()  # no trainer_state.json: an unfinished one
    assert files.complete_checkpoints() == [files.checkpoint(2), files.checkpoint(10)]
    assert complete_checkpoints(files.checkpoints) == files.complete_checkpoints()
    assert read_trainer_state(files.checkpoint(10))["validation_reward"] == 1.0
    assert [(c["step"], c["validation_reward"]) for c in list_checkpoints(tmp_path)] == [
        (2, 0.2), (10, 1.0)]
    with pytest.raises(ValidationError, match="not a complete checkpoint") as info:
        read_trainer_state(files.checkpoint(30))
    assert info.value.where == str(files.checkpoint(30))


def test_tracker_run_ids_of_a_checkpoint_are_read_without_torch(tmp_path):
    ckpt = JobDir(tmp_path).checkpoint(3)
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text(json.dumps({"trackers": {"wandb": "abc"}}))
    code = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any import of torch fails
        from rltune.observability.session import saved_run_ids
        print(saved_run_ids({str(ckpt)!r}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'wandb': 'abc'}"
