"""Train, save and load the byte-level BPE tokenizer of the tiny models.

The pipeline is the Qwen2 one (NFC, Qwen2's split regex, byte-level, digits one by one), with
our own merges. That choice is deliberate: in transformers v5, ``AutoTokenizer`` sees
``model_type: qwen2`` in config.json and builds a ``Qwen2Tokenizer``, which throws away the
saved pre-tokenizer and installs Qwen2's. With the same pipeline both loaders tokenize
identically (tested against ``tokenizers.Tokenizer.from_file``). Still, rltune loads with
:func:`load_tokenizer` (``PreTrainedTokenizerFast.from_pretrained``), which keeps
``tokenizer.json`` exactly as saved.

Example:
    >>> tok = train_tokenizer(seed=0)                      # doctest: +SKIP
    >>> tok.decode(tok.encode("What is 37 * 4?"))          # doctest: +SKIP
    'What is 37 * 4?'
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rltune.models.chat_template import (
    CHAT_TEMPLATE,
    ENDOFTEXT,
    IM_END,
    PAD,
    SPECIAL_TOKENS,
    TOOL_TOKENS,
    render_chat,
)
from rltune.models.tasks import CALCULATOR_TOOL, TaskConfig
from rltune.models.transcripts import make_transcripts
from rltune.sdk.errors import NotFoundError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

# Same as transformers' Qwen2Tokenizer (see module docstring for why it must stay equal).
QWEN2_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
DEFAULT_VOCAB_SIZE = 1024

# Everyday words so that prompts of other templates (weather, search ...) get merges too.
_WORD_TEXT = (
    "the a an of to and in is it you that he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use each which "
    "she do how their if will up other about out many then them these so some her would make "
    "like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part "
    "weather city temperature today tomorrow search result question answer tool function "
    "please thanks sure let me think step calculate compute sum difference product total "
    "hello help user assistant system error value name arguments expression json"
)
_WORDS = tuple(_WORD_TEXT.split())


def _corpus(seed: int, n_transcripts: int) -> Iterator[str]:
    rng = random.Random(f"corpus:{seed}")
    special = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS + TOOL_TOKENS))
    configs = (TaskConfig(digits=1), TaskConfig(digits=2), TaskConfig(digits=3))
    for i, cfg in enumerate(configs):
        for msgs in make_transcripts(n_transcripts // len(configs), seed + i, config=cfg):
            # Special tokens are never merged; train only on the text between them.
            yield from (p for p in special.split(render_chat(msgs, [CALCULATOR_TOOL])) if p)
    for _ in range(n_transcripts):
        words = rng.choices(_WORDS, k=rng.randint(4, 16))
        text = " ".join(words).capitalize() + rng.choice([".", "?", "!", ":"])
        yield text + " " + str(rng.randint(0, 10 ** rng.randint(1, 6)))


def train_tokenizer(
    seed: int = 0, vocab_size: int = DEFAULT_VOCAB_SIZE, n_transcripts: int = 3000
) -> PreTrainedTokenizerFast:
    """Train the BPE on generated text and wrap it with specials and the chat template.

    Takes about a second (cached per process for the same arguments). eos is
    ``<|im_end|>``, pad is ``<|pad|>``, padding is on the left (generation batches).
    ``vocab_size`` is an upper bound: the small corpus may run out of merges first.
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_train_bpe_json(seed, vocab_size, n_transcripts)),
        eos_token=IM_END,
        pad_token=PAD,
        # Qwen2Tokenizer's default unk; set here too so both loaders report the same specials.
        unk_token=ENDOFTEXT,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=1024,
    )


@functools.lru_cache(maxsize=4)
def _train_bpe_json(seed: int, vocab_size: int, n_transcripts: int) -> str:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, trainers
    from tokenizers import pre_tokenizers as pt

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pt.Sequence(
        [
            pt.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pt.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pt.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed, n_transcripts), trainer=trainer)
    # Tool markup: one token each, but not "special", so decode(skip_special_tokens=True)
    # keeps them and tool-call parsers still see them (as Qwen2.5 does).
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return tok.to_str()


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a saved tokenizer from a model directory, keeping its ``tokenizer.json`` pipeline.

    Use this (not ``AutoTokenizer``) for rltune's own models; see the module docstring.
    """
    from transformers import PreTrainedTokenizerFast

    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise NotFoundError(
            f"no tokenizer.json in {path}",
            where=str(path),
            hint="pass a model directory, or build one with `rltune models build-demo`",
        )
    return PreTrainedTokenizerFast.from_pretrained(str(path))
