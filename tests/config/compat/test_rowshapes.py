"""Jobs read TRL's and verl's rows, from JSONL, JSON, parquet or a saved ``datasets`` folder,
keeping every column for the rollout and the rewards."""

from __future__ import annotations

import json

import pytest

from rltune.config.data import load_dataset
from rltune.sdk.errors import DatasetError

STANDARD = {"prompt": "What is 2+3?", "solution": "5", "difficulty": 2,
            "tags": ["add"]}
CONVERSATIONAL = {"prompt": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "What is 2+3?"}],
                  "completion": [{"role": "assistant", "content": "5"}], "solution": "5"}
VERL = {"data_source": "openai/gsm8k", "ability": "math",
        "prompt": [{"role": "user", "content": "Natalia sold 48 clips. How many?"}],
        "reward_model": {"style": "rule", "ground_truth": "72"},
        "extra_info": {"split": "train", "index": 0}}
RLTUNE_PLUS = {"messages": [{"role": "user", "content": "hi"}], "rollout_extra": {"a": 1},
               "topic": "greeting"}


def check(rows):
    std, conv, verl, own = rows
    assert std.message_dicts() == [{"role": "user", "content": "What is 2+3?"}]
    assert std.rollout_extra == {"solution": "5", "difficulty": 2, "tags": ["add"]}
    assert std.ground_truth == "5"  # solution is the reference answer
    assert conv.message_dicts() == CONVERSATIONAL["prompt"]
    assert conv.rollout_extra == {"completion": CONVERSATIONAL["completion"], "solution": "5"}
    assert verl.ground_truth == "72"
    assert verl.rollout_extra == {k: v for k, v in VERL.items() if k != "prompt"}
    assert own.rollout_extra == {"a": 1, "topic": "greeting"}


def test_jsonl_rows_in_trl_and_verl_shapes(tmp_path):
    p = tmp_path / "train.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in
                         (STANDARD, CONVERSATIONAL, VERL, RLTUNE_PLUS)))
    check(load_dataset(p))


def test_a_json_list(tmp_path):
    p = tmp_path / "train.json"
    p.write_text(json.dumps([STANDARD, CONVERSATIONAL, VERL, RLTUNE_PLUS]))
    check(load_dataset(p))


def test_parquet_and_a_saved_datasets_folder(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pip install 'rltune[data]'")
    import pyarrow.parquet as pq

    rows = [STANDARD, {**STANDARD, "prompt": "What is 1+1?", "solution": "2"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    loaded = load_dataset(tmp_path / "train.parquet")
    assert [r.ground_truth for r in loaded] == ["5", "2"]
    assert loaded[1].rollout_extra["tags"] == ["add"]
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    assert [r.ground_truth for r in load_dataset(tmp_path / "saved")] == ["5", "2"]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:1])}).save_to_disk(
        str(tmp_path / "dict"))
    assert len(load_dataset(tmp_path / "dict")) == 1  # its train split


def test_a_row_without_a_prompt_names_its_columns_and_the_converter(tmp_path):
    p = tmp_path / "train.jsonl"
    p.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    with pytest.raises(DatasetError) as err:
        load_dataset(p)
    text = f"{err.value} {err.value.hint}"
    assert "no 'messages' and no 'prompt' column (columns: question, answer)" in text
    assert "rltune data convert --prompt-key" in text
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "missing.parquet")
