"""The tiny models' tokenizer: round trips and loader equivalence."""

from __future__ import annotations

import pytest

from rltune.models import load_tokenizer
from rltune.models.chat_template import SPECIAL_TOKENS, TOOL_TOKENS
from rltune.models.tasks import CALCULATOR_TOOL, TaskConfig
from rltune.models.transcripts import make_transcripts
from rltune.sdk.errors import NotFoundError

SAMPLES = [
    "What is 37 * 4?",
    "<|im_start|>user\nhéllo wörld 12345  \n\n x<|im_end|>",
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "9 - 71"}}\n</tool_call>',
    "Unicode: 日本語, emoji 🙂, tabs\tand trailing spaces   ",
]


def _texts(tok):
    convs = make_transcripts(60, seed=5, config=TaskConfig(digits=3))
    rendered = [tok.apply_chat_template(c, tools=[CALCULATOR_TOOL], tokenize=False) for c in convs]
    return SAMPLES + rendered


def test_round_trip_matches_raw_tokenizers_pipeline(tiny_model_dir):
    from tokenizers import Tokenizer

    tok = load_tokenizer(tiny_model_dir)
    raw = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    for text in _texts(tok):
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == raw.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids) == text


def test_auto_tokenizer_tokenizes_identically(tiny_model_dir):
    """AutoTokenizer builds Qwen2Tokenizer (config.json says qwen2); it must not differ."""
    from transformers import AutoTokenizer

    ours, auto = load_tokenizer(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)
    for text in _texts(ours):
        assert auto.encode(text, add_special_tokens=False) == ours.encode(
            text, add_special_tokens=False
        )
    assert auto.chat_template == ours.chat_template
    assert (
        (auto.eos_token, auto.pad_token)
        == (ours.eos_token, ours.pad_token)
        == ("<|im_end|>", "<|pad|>")
    )
    assert set(auto.all_special_tokens) == set(ours.all_special_tokens)


def test_digits_split_and_markup_tokens_are_single(tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    assert tok.tokenize("12345") == ["1", "2", "3", "4", "5"]
    for t in SPECIAL_TOKENS + TOOL_TOKENS:
        assert len(tok.encode(t, add_special_tokens=False)) == 1, t
    # tool markup survives skip_special_tokens (parsers need it); control tokens do not
    ids = tok.encode("<|im_start|>a<tool_call>b</tool_call><|im_end|>", add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == "a<tool_call>b</tool_call>"
    assert tok.padding_side == "left"


def test_load_tokenizer_reports_missing_dir(tmp_path):
    with pytest.raises(NotFoundError, match=r"no tokenizer\.json"):
        load_tokenizer(tmp_path)
