"""SFT before RL: the loss mask (assistant turns only, tool calls included) on a tiny
tokenizer, the supervised step on a tiny model, and the job keys an SFT job refuses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rltune.config import HyperParameters, resolve_algorithm
from rltune.config.data import DataRow, EpochSampler
from rltune.models.chat_template import IM_END
from rltune.sdk.errors import ConfigError, DatasetError
from rltune.trainer.sft import SftSteps, encode_messages

CALL = {"type": "function", "id": "call_0",
        "function": {"name": "calculator", "arguments": {"expression": "12*3"}}}
CONV = [
    {"role": "system", "content": "You are a calculator agent."},
    {"role": "user", "content": "What is 12*3?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "36"},
    {"role": "assistant", "content": "The answer is 36."},
]


@pytest.fixture(scope="module")
def tok():
    from rltune.models.tokenizer import train_tokenizer

    return train_tokenizer(n_transcripts=60)


def _spans(tok, ids, mask):
    """The decoded runs of consecutive masked tokens."""
    spans, cur = [], []
    for i, m in zip(ids, mask, strict=True):
        if m:
            cur.append(i)
        elif cur:
            spans.append(tok.decode(cur))
            cur = []
    if cur:
        spans.append(tok.decode(cur))
    return spans


def test_the_loss_is_on_assistant_turns_only_tool_calls_included(tok):
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {}}}]
    ids, mask = encode_messages(tok, CONV, tools, max_length=1024)
    spans = _spans(tok, ids, mask)
    # exactly the two assistant turns, each with its <|im_end|>: the tool call, the answer
    assert len(spans) == 2, spans
    assert spans[0].startswith("<tool_call>") and "12*3" in spans[0]
    assert spans[0].endswith(f"</tool_call>{IM_END}")
    assert spans[1] == f"The answer is 36.{IM_END}"
    # system, user, the tools block and the tool result carry no loss
    unmasked = tok.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    for text in ("calculator agent", "What is 12*3?", "<tool_response>", "36\n</tool_response>"):
        assert text in unmasked


def test_max_length_cuts_the_row_and_its_mask(tok):
    ids, mask = encode_messages(tok, CONV, None, max_length=20)
    assert len(ids) == len(mask) == 20


def _steps(tok, rows, **hp):
    from rltune.trainer.testing import tiny_qwen2
    from rltune.trainer.update import PolicyUpdater

    hp = HyperParameters(algorithm="sft", learning_rate=3e-3, batch_size=2, max_length=256,
                         max_prompt_length=128, **hp)
    model = tiny_qwen2(vocab_size=len(tok))
    updater = PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=20)
    rt = SimpleNamespace(hp=hp, tokenizer=tok, model=model, updater=updater)
    return SftSteps(rt, train_rows=rows, sampler=EpochSampler(len(rows), 2, 0))


async def test_sft_steps_lower_the_loss_on_assistant_tokens(tok):
    rows = [DataRow(messages=CONV), DataRow(messages=[*CONV[:2], CONV[4]])]
    steps = _steps(tok, rows)
    before = (await steps.validate(rows))["validation/sft/loss"]
    for step in range(1, 9):
        result = await steps.run_step(step)
    assert result.updated and result.metrics["sft/tokens"] > 0
    assert steps.rt.updater.step == 8  # the LR schedule and checkpoint counter moved
    after = (await steps.validate(rows))["validation/sft/loss"]
    assert after < before - 0.5, (before, after)


def test_a_row_without_an_assistant_turn_is_named(tok):
    rows = [DataRow(messages=CONV), DataRow(messages=CONV[:2], line=7)]
    with pytest.raises(DatasetError, match="row 7 has no assistant turn"):
        _steps(tok, rows)


@pytest.mark.parametrize("key, value", [("n_rollouts", 8), ("kl_loss_coef", 0.01),
                                        ("clip_ratio_high", 0.3), ("gamma", 0.9)])
def test_rl_keys_are_refused_in_an_sft_job(key, value):
    with pytest.raises(Exception) as err:
        HyperParameters(algorithm="sft", **{key: value})
    assert key in str(err.value)


def test_an_sft_job_refuses_reward_functions(tmp_path):
    from rltune.config import load_job_config

    (tmp_path / "train.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    (tmp_path / "job.yaml").write_text(
        "model: nano\ndatasets: [{type: training, file_name: train.jsonl}]\n"
        "functions: [{type: reward, name: r, fcmodel: {classpath: r.py:R}}]\n"
        "training: {hyper_parameters: {algorithm: sft}}\n")
    with pytest.raises(ConfigError, match="algorithm sft trains on the rows' messages"):
        load_job_config(tmp_path / "job.yaml")
