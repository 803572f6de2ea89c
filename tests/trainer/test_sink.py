import json
import math

from rltune.trainer.sink import FileSink, read_metrics


def test_file_sink_writes_all_streams(tmp_path):
    sink = FileSink(tmp_path)
    sink.metrics(1, {"critic/rewards/mean": 0.5, "actor/kl_loss": math.nan})
    sink.metrics(2, {"critic/rewards/mean": 0.75})
    sink.trajectories(1, [{"rollout_id": "r1", "reward": 1.0}, {"rollout_id": "r2"}])
    sink.log("step 1 done\nsecond line", level="WARNING")
    sink.progress({"step": 2, "total_steps": 10})
    sink.close()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["metrics"]["actor/kl_loss"] is None  # NaN is not valid JSON
    lines = (tmp_path / "trajectories" / "step_000001.jsonl").read_text().splitlines()
    assert [json.loads(x)["rollout_id"] for x in lines] == ["r1", "r2"]
    log = (tmp_path / "train.log").read_text()
    assert "WARNING" in log and "second line" in log
    assert json.loads((tmp_path / "progress.json").read_text())["step"] == 2


def test_read_metrics_skips_torn_last_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "metrics": {}}\n{"step": 2, "met')
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]
