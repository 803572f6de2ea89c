"""``rltune data make-preferences``: calculator preference pairs a DPO job reads as they are,
and TRL's preference columns read the same way."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config.data import load_dataset
from rltune.trainer.dpo import preference_pair


def run(*args):
    return CliRunner().invoke(app, ["data", "make-preferences", *map(str, args)])


def test_pairs_load_as_dpo_rows_and_keep_their_solution(tmp_path):
    out = tmp_path / "pairs.jsonl"
    r = run("--out", out, "--rows", 6, "--digits", 1)
    assert r.exit_code == 0, r.output
    assert "wrote 6 preference pairs (train)" in r.output
    rows = load_dataset(out)
    assert len(rows) == 6 and all(row.ground_truth is not None for row in rows)
    chosen, rejected = preference_pair(rows[0], "training", 0)
    assert chosen[0]["tool_calls"] and chosen != rejected
    held = tmp_path / "held.jsonl"
    assert run("--out", held, "--rows", 6, "--split", "heldout", "--digits", 1).exit_code == 0
    train_q = {row.messages[-1].content for row in rows}
    assert not train_q & {row.messages[-1].content for row in load_dataset(held)}


def test_a_bad_split_is_a_usage_error(tmp_path):
    r = run("--out", tmp_path / "x.jsonl", "--split", "test")
    assert r.exit_code == 2 and "--split 'test'" in r.output
    assert not (tmp_path / "x.jsonl").exists()


def test_trl_preference_columns_are_dpo_rows(tmp_path):
    path = tmp_path / "trl.jsonl"
    rows = [{"prompt": "2+3?", "chosen": "5", "rejected": "6"},
            {"prompt": [{"role": "user", "content": "1+1?"}],
             "chosen": [{"role": "assistant", "content": "2"}],
             "rejected": [{"role": "assistant", "content": "3"}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_dataset(path)
    pairs = [preference_pair(row, "training", n) for n, row in enumerate(loaded)]
    assert pairs[0] == ([{"role": "assistant", "content": "5"}],
                        [{"role": "assistant", "content": "6"}])
    assert pairs[1][1] == [{"role": "assistant", "content": "3"}]
