"""Token strings for the console's token view, from a real (tiny) tokenizer."""

from __future__ import annotations

from rltune.console.tokens import token_texts, tokenizer_dir, with_token_text
from rltune.models import load_tokenizer


def test_token_texts_join_back_to_the_text(tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    ids = tok("What is 12 * 67?")["input_ids"]
    texts = token_texts(ids, tiny_model_dir)
    assert len(texts) == len(ids)
    assert "".join(texts) == tok.decode(ids)


def test_with_token_text_adds_one_string_per_id_and_keeps_the_record(tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    ids = tok("Calculate 9 * 85.")["input_ids"]
    rec = {
        "rollout_id": "r",
        "tokens": [{"input_ids": ids, "loss_mask": [1] * len(ids), "logprobs": [-0.5] * len(ids)}],
    }
    out = with_token_text(rec, tiny_model_dir)
    assert len(out["tokens"][0]["text"]) == len(ids)
    assert "text" not in rec["tokens"][0]  # the stored record is not modified


def test_tokenizer_dir_finds_paths_and_names_but_never_builds(tiny_model_dir, tmp_path):
    assert tokenizer_dir(str(tiny_model_dir)) == tiny_model_dir
    assert tokenizer_dir("nano", home=tmp_path) is None  # not built here: no build triggered
    assert tokenizer_dir(None) is None
    assert with_token_text({"tokens": [{"input_ids": [1]}]}, None)["tokens"][0]["text"] is None
