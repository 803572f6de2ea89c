"""DPO: the preference rows, the response masks on a tiny tokenizer, the preference step on a
tiny model (full weights against a frozen copy, and LoRA against its disabled adapters), the
knobs taking effect, and the keys a DPO job refuses."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rltune.config import HyperParameters, resolve_algorithm
from rltune.config.data import DataRow, EpochSampler
from rltune.models.chat_template import IM_END
from rltune.models.transcripts import preference_rows
from rltune.sdk.errors import ConfigError, DatasetError
from rltune.trainer.dpo import DpoSteps, encode_response, preference_pair


@pytest.fixture(scope="module")
def tok():
    from rltune.models.tokenizer import train_tokenizer

    return train_tokenizer(n_transcripts=60)


@pytest.fixture(scope="module")
def pairs():
    """Calculator preference rows as a DPO job reads them (through the row loader's shapes)."""
    from rltune.config.compat.rowshapes import to_rltune_row

    return [DataRow.model_validate(to_rltune_row(r)[0])
            for r in preference_rows(4, seed=0)]


def test_generated_pairs_prefer_the_correct_tool_use():
    from rltune.models.tasks import extract_answer

    for row in preference_rows(20, seed=3):
        chosen, rejected = row["chosen"], row["rejected"]
        assert chosen[0]["tool_calls"] and extract_answer(chosen[-1]["content"]) == \
            row["solution"]
        assert extract_answer(rejected[-1]["content"]) != row["solution"]
    kinds = {len(r["rejected"]) for r in preference_rows(20, seed=3)}
    assert kinds == {1, 3}  # a guess without the tool, and the tool on a wrong expression


def test_only_the_response_is_masked(tok, pairs):
    row = pairs[0]
    chosen, _ = preference_pair(row, "training", 0)
    ids, mask = encode_response(tok, row.message_dicts(), chosen, row.tool_dicts(),
                                max_length=1024)
    text = tok.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert text.startswith("<tool_call>") and text.endswith(chosen[-1]["content"] + IM_END)
    unmasked = tok.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    assert "careful assistant" in unmasked and "<tool_response>" in unmasked
    assert text.count("<tool_call>") == 1 and "careful assistant" not in text
    assert "tool_response" not in text and row.messages[-1].content not in text


@pytest.mark.parametrize("value, match", [
    (None, "row 3: has no 'rejected' response"),
    (42, "'rejected' is not a response"),
    ([{"role": "user", "content": "x"}], "'rejected' has no assistant message"),
])
def test_a_bad_pair_is_named_by_its_line(value, match):
    extra = {"chosen": "5"} if value is None else {"chosen": "5", "rejected": value}
    row = DataRow(messages=[{"role": "user", "content": "2+3?"}], rollout_extra=extra, line=3)
    with pytest.raises(DatasetError, match=match):
        preference_pair(row, "training", 0)


def _steps(tok, rows, **hp):
    from rltune.trainer.testing import tiny_qwen2
    from rltune.trainer.update import PolicyUpdater, frozen_copy

    hp = HyperParameters(algorithm="dpo", learning_rate=3e-3, batch_size=2, max_length=256,
                         max_prompt_length=128, **hp)
    knobs = resolve_algorithm(hp)
    model = tiny_qwen2(vocab_size=len(tok))
    if hp.lora_rank:
        from rltune.trainer.lora import wrap_with_lora

        model, reference = wrap_with_lora(model, hp), None
    else:
        reference = frozen_copy(model)
    updater = PolicyUpdater(model, hp, knobs, total_steps=20, reference_model=reference)
    rt = SimpleNamespace(hp=hp, knobs=knobs, tokenizer=tok, model=model, updater=updater)
    return DpoSteps(rt, train_rows=rows, sampler=EpochSampler(len(rows), 2, 0))


@pytest.mark.parametrize("lora", [0, 8], ids=["full", "lora"])
async def test_dpo_steps_prefer_the_chosen_responses(tok, pairs, lora):
    steps = _steps(tok, pairs, **({"lora_rank": lora} if lora else {}))
    before = await steps.validate(pairs)
    # the policy starts as its reference: no margin, the loss is log 2
    assert before["validation/dpo/reward_margin"] == pytest.approx(0.0, abs=1e-5)
    assert before["validation/dpo/loss"] == pytest.approx(math.log(2), abs=1e-5)
    for step in range(1, 7):
        result = await steps.run_step(step)
    assert result.updated and set(result.metrics) >= {
        "dpo/loss", "dpo/reward_margin", "dpo/accuracy", "dpo/chosen_reward",
        "dpo/rejected_reward", "dpo/chosen_logp", "dpo/rejected_logp", "actor/grad_norm"}
    assert steps.rt.updater.step == 6
    after = await steps.validate(pairs)
    assert after["validation/dpo/accuracy"] == 1.0
    assert after["validation/dpo/reward_margin"] > 0.2, after
    assert after["validation/dpo/loss"] < math.log(2) - 0.1, after


async def test_the_knobs_take_effect(tok, pairs):
    # at the start the margin is 0: ipo's loss is (1 / (2 beta))^2, sigmoid's log 2 for any beta
    ipo = await _steps(tok, pairs, dpo_loss_type="ipo", dpo_beta=0.25).validate(pairs)
    assert ipo["validation/dpo/loss"] == pytest.approx(4.0, abs=1e-4)
    plain, smooth = _steps(tok, pairs, dpo_beta=0.5), _steps(tok, pairs, dpo_beta=0.5,
                                                              dpo_label_smoothing=0.4)
    for s in (plain, smooth):
        await s.run_step(1)
    a, b = (await plain.validate(pairs)), (await smooth.validate(pairs))
    assert a["validation/dpo/loss"] != pytest.approx(b["validation/dpo/loss"], abs=1e-4)
    # the NLL term: reported, added to the loss, and it keeps the chosen responses likelier
    nll = _steps(tok, pairs, dpo_beta=0.5, dpo_nll_weight=1.0)
    first = (await nll.run_step(1)).metrics
    assert first["dpo/chosen_nll"] > 0
    assert first["dpo/loss"] == pytest.approx(math.log(2), abs=1e-4)  # the DPO part alone
    assert "dpo/chosen_nll" not in (await plain.run_step(2)).metrics
    await nll.run_step(2)
    c, d = (await plain.validate(pairs)), (await nll.validate(pairs))
    assert d["validation/dpo/chosen_logp"] > c["validation/dpo/chosen_logp"]


@pytest.mark.parametrize("key, value", [("n_rollouts", 8), ("kl_loss_coef", 0.01),
                                        ("clip_ratio_high", 0.3), ("temperature", 0.7)])
def test_rl_keys_are_refused_in_a_dpo_job(key, value):
    with pytest.raises(Exception) as err:
        HyperParameters(algorithm="dpo", **{key: value})
    assert key in str(err.value) and "algorithm is dpo" in str(err.value)


@pytest.mark.parametrize("algorithm", ["grpo", "sft"])
def test_dpo_knobs_are_refused_elsewhere(algorithm):
    with pytest.raises(Exception, match="only applies to algorithm dpo"):
        HyperParameters(algorithm=algorithm, dpo_beta=0.2)


def test_a_dpo_job_refuses_reward_functions(tmp_path):
    from rltune.config import load_job_config

    (tmp_path / "job.yaml").write_text(
        "model: nano\ndatasets: [{type: training, file_name: train.jsonl}]\n"
        "functions: [{type: reward, name: r, fcmodel: {classpath: r.py:R}}]\n"
        "training: {hyper_parameters: {algorithm: dpo}}\n")
    with pytest.raises(ConfigError, match="algorithm dpo trains on the rows' preference pairs"):
        load_job_config(tmp_path / "job.yaml")
