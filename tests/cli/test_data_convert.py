"""``rltune data convert``: verl-shaped rows → rltune JSONL, every bad row named."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config.data import load_dataset

VERL = [
    {"data_source": "openai/gsm8k", "ability": "math",
     "prompt": [{"role": "user", "content": "Natalia sold 48 clips. How many?"}],
     "reward_model": {"style": "rule", "ground_truth": "72"},
     "extra_info": {"split": "train", "index": 0}},
    {"data_source": "toy", "prompt": "2+2?", "reward_model": {"ground_truth": "4"}},
]
BAD = [{"prompt": []}, {"question": "no prompt"}, {"prompt": [{"role": "robot", "content": "x"}]}]


def run(*args):
    return CliRunner().invoke(app, ["data", "convert", *map(str, args)])


def test_jsonl_converts_and_loads_as_training_data(tmp_path):
    src = tmp_path / "verl.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in VERL))
    out = tmp_path / "train.jsonl"
    r = run(src, "--out", out)
    assert r.exit_code == 0, r.output
    rows = load_dataset(out)
    assert [row.ground_truth for row in rows] == ["72", "4"]
    assert rows[0].rollout_extra == {"data_source": "openai/gsm8k", "ability": "math",
                                     "extra_info": {"split": "train", "index": 0},
                                     "reward_model": {"style": "rule", "ground_truth": "72"}}
    assert rows[1].message_dicts() == [{"role": "user", "content": "2+2?"}]


def test_bad_rows_are_named_and_nothing_is_written(tmp_path):
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in VERL + BAD) + "{oops\n")
    out = tmp_path / "train.jsonl"
    r = run(src, "--out", out)
    assert r.exit_code == 1 and not out.exists()
    assert "row 3: prompt: is empty" in r.output
    assert "row 4: prompt: missing" in r.output
    assert "row 5: prompt.0.role" in r.output
    assert "row 6: not JSON" in r.output and "4 of 6 rows are bad" in r.output
    r = run(src, "--out", out, "--skip-invalid")
    assert r.exit_code == 0 and "skipped 4 bad rows" in r.output
    assert len(load_dataset(out)) == 2


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pip install 'rltune[data]'")
    import pyarrow.parquet as pq

    src = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(VERL[:1]), src)
    out = tmp_path / "train.jsonl"
    assert run(src, "--out", out).exit_code == 0
    assert load_dataset(out)[0].ground_truth == "72"


def test_parquet_without_pyarrow_says_how_to_install(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *a, **kw):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    r = run(tmp_path / "x.parquet", "--out", tmp_path / "o.jsonl")
    assert r.exit_code == 1 and "rltune[data]" in r.output


def test_trl_rows_keep_every_column_and_the_mapping_is_shown(tmp_path):
    src = tmp_path / "trl.jsonl"
    src.write_text(json.dumps({"prompt": "2+2?", "solution": "4", "difficulty": 1}) + "\n"
                   + json.dumps({"prompt": [{"role": "user", "content": "3+3?"}],
                                 "solution": "6", "difficulty": 2}) + "\n")
    out = tmp_path / "train.jsonl"
    r = run(src, "--out", out)
    assert r.exit_code == 0, r.output
    assert "mapped prompt (a string) → messages (one user message) (1 row)" in r.output
    assert "mapped prompt → messages (1 row)" in r.output
    assert "mapped solution, difficulty → rollout_extra (2 rows)" in r.output
    rows = load_dataset(out)
    assert [row.rollout_extra for row in rows] == [{"solution": "4", "difficulty": 1},
                                                   {"solution": "6", "difficulty": 2}]
