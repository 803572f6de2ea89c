"""The step-file index behind the trajectory pages: filters, seeks, torn lines, rebuilds."""

from __future__ import annotations

import json

from rltune.console.trajectories import prompt_of, step_index, summary
from rltune.trainer.sink import FileSink


def _records(n: int, start: int = 0):
    for i in range(start, start + n):
        yield {
            "rollout_id": f"r{i}",
            "sample_index": i // 4,
            "reward": (i % 4) / 4,
            "status": "failed" if i % 10 == 0 else "success",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": f"Q{i // 4}"}]},
            ],
            "tokens": [
                {"input_ids": list(range(20)), "loss_mask": [1] * 20, "logprobs": [-0.1] * 20}
            ],
        }


def test_index_filters_and_reads_only_selected_lines(tmp_path):
    sink = FileSink(tmp_path)  # the trainer's writer
    sink.trajectories(3, _records(40))
    sink.close()
    idx = step_index(tmp_path / "trajectories" / "step_000003.jsonl")
    assert len(idx.spans) == 40
    assert [r["rollout_id"] for r in idx.read(idx.select(sample_index=2))] == [
        "r8",
        "r9",
        "r10",
        "r11",
    ]
    assert len(idx.select(status="failed")) == 4
    assert len(idx.select(min_reward=0.5, max_reward=0.5)) == 10
    assert idx.read(idx.select(rollout_id="r37"))[0]["tokens"][0]["input_ids"][-1] == 19
    assert idx.select(rollout_id="nope") == []
    assert [r["rollout_id"] for r in idx.read(idx.select(q="q9"))] == [
        "r36",
        "r37",
        "r38",
        "r39",
    ]  # content parts, case-insensitive


def test_index_skips_a_torn_last_line_and_rebuilds_when_the_file_grows(tmp_path):
    path = tmp_path / "step_000001.jsonl"
    lines = [json.dumps(r) for r in _records(3)]
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:25])  # job still writing
    first = step_index(path)
    assert [f["rollout_id"] for f in first.fields] == ["r0", "r1"]
    with path.open("a") as fh:
        fh.write(lines[2][25:] + "\n")
    again = step_index(path)
    assert again is not first and [f["rollout_id"] for f in again.fields] == ["r0", "r1", "r2"]
    assert step_index(path) is again  # unchanged file: the cached index


def test_summary_drops_messages_and_tokens_and_keeps_the_prompt():
    rec = next(_records(1))
    light = summary(rec)
    assert "tokens" not in light and "messages" not in light
    assert light["prompt"] == prompt_of(rec) == "Q0"
    assert light["reward"] == rec["reward"]
