"""Dataset rows: row-by-row validation with line numbers, ground_truth, seeded sampler."""

from __future__ import annotations

import json

import pytest

from rltune.config import EpochSampler, load_dataset
from rltune.sdk.errors import DatasetError


def _write(tmp_path, lines):
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _row(content="1+1?", **extra):
    return json.dumps({"messages": [{"role": "user", "content": content}], **extra})


def test_valid_rows_and_ground_truth_order(tmp_path):
    p = _write(tmp_path, [
        _row(rollout_extra={"answer": "a", "solution": "s"}),
        _row(rollout_extra={"ground_truth": "g", "answer": "a"}),
        _row(rollout_extra={"answer": 3}),
        _row(ground_truth="own", rollout_extra={"solution": "s"}),
        "",
        _row(tools=[{"type": "function", "function": {"name": "calculator"}}]),
    ])
    rows = load_dataset(p)
    assert [r.ground_truth for r in rows] == ["s", "g", 3, "own", None]
    assert [r.line for r in rows] == [1, 2, 3, 4, 6]
    assert rows[4].tool_dicts()[0]["function"]["name"] == "calculator"
    assert rows[0].message_dicts() == [{"role": "user", "content": "1+1?"}]


def test_every_bad_line_is_reported_and_nothing_loaded(tmp_path):
    p = _write(tmp_path, [
        _row(),
        "{not json",
        json.dumps({"messages": [{"role": "robot", "content": "x"}]}),
        json.dumps({"rollout_extra": {}}),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": [{"function": {}}]}),
        json.dumps([1, 2]),
        json.dumps({"messages": [{"role": "user"}]}),
    ])
    with pytest.raises(DatasetError) as info:
        load_dataset(p)
    text = str(info.value)
    assert "6 bad row(s)" in text or "bad row(s)" in text
    assert f"{p}:2: not valid JSON" in text
    assert f"{p}:3: field 'messages[0].role'" in text
    assert f"{p}:4: no 'messages' and no 'prompt' column (columns: rollout_extra)" in text
    assert "rltune data convert" in text  # the hint names the converter
    assert f"{p}:5: field 'tools[0]'" in text and "name" in text
    assert f"{p}:6: a row must be a JSON object" in text
    assert f"{p}:7: field 'messages[0]'" in text and "needs 'content'" in text
    assert info.value.where == f"{p}:2"


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "none.jsonl")
    with pytest.raises(DatasetError, match="no rows"):
        load_dataset(_write(tmp_path, [""]))


def test_sampler_permutes_per_epoch_and_resumes_exactly():
    s = EpochSampler(n_rows=7, batch_size=3, seed=5)
    assert s.steps_per_epoch == 2
    epoch0 = s.next_batch() + s.next_batch()
    assert len(set(epoch0)) == 6 and s.epoch == 0
    state = s.state_dict()
    rest = [s.next_batch() for _ in range(3)]
    extra = s.sample_extra(4)
    assert s.epoch == 2
    t = EpochSampler(n_rows=7, batch_size=3, seed=5)
    t.load_state_dict(json.loads(json.dumps(state)))
    assert [t.next_batch() for _ in range(3)] == rest and t.sample_extra(4) == extra
    # A different seed gives a different order; same seed the same.
    assert EpochSampler(7, 3, seed=6).next_batch() != EpochSampler(7, 3, seed=5).next_batch()
    with pytest.raises(DatasetError, match="seed"):
        EpochSampler(7, 3, seed=6).load_state_dict(state)
