"""Warm-start pieces (fast, on the tiny model) and the real nano build (built once per session
for the learning tests; checking it here costs nothing more)."""

from __future__ import annotations

import pytest

from rltune.models import build_tiny_model, read_meta
from rltune.models.tasks import CalcTask, TaskConfig
from rltune.models.transcripts import direct_transcript, tool_transcript
from rltune.models.warmstart import (
    WarmStartConfig,
    _loss_with_shared_prefix,
    encode_transcripts,
    warm_start,
)


def test_labels_cover_exactly_the_assistant_turns():
    _, tok = build_tiny_model()
    convs = [tool_transcript(CalcTask(37, "*", 4)), direct_transcript(CalcTask(2, "+", 3))]
    ids, att, labels = encode_transcripts(tok, convs)
    assert ids.shape == att.shape == labels.shape and ids.shape[0] == 2
    picked = [tok.decode([t for t in row.tolist() if t != -100]) for row in labels]
    assert picked[0] == (
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "37 * 4"}}\n'
        "</tool_call><|im_end|>### ANSWER: 148 ###<|im_end|>"
    )
    assert picked[1] == "### ANSWER: 5 ###<|im_end|>"
    assert int(att[1].sum()) < ids.shape[1]  # right padding on the shorter row
    assert bool((labels[1][att[1] == 0] == -100).all())


def test_shared_prefix_loss_equals_plain_loss():
    import torch

    model, tok = build_tiny_model()
    convs = [tool_transcript(CalcTask(a, "+", 2)) for a in range(3)] + [
        direct_transcript(CalcTask(9, "*", 9))
    ]
    ids, att, labels = encode_transcripts(tok, convs)
    plain = model(input_ids=ids, attention_mask=att, labels=labels).loss
    shared = _loss_with_shared_prefix(model, ids, att, labels)
    torch.testing.assert_close(shared, plain, rtol=1e-5, atol=1e-5)


def _quick_config(**kw) -> WarmStartConfig:
    """A few-step run of the tiny model: batches of 4, 4 evaluation episodes, fp32, 1 thread."""
    base = dict(task=TaskConfig(digits=1, heldout_percent=30), batch_size=4, eval_episodes=4,
                threads=1, mix_tool_fraction=None)
    return WarmStartConfig(**{**base, **kw})


def test_short_run_trains_and_reports(monkeypatch):
    import torch

    model, tok = build_tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    events = []
    threads = torch.get_num_threads()
    cfg = _quick_config(max_steps=4, eval_every=2)
    res = warm_start(model, tok, cfg, events.append)
    assert [e["step"] for e in events] == [1, 2, 3, 4]
    assert [e["phase"] for e in events] == ["train", "eval", "train", "eval"]
    assert res.steps == 4 and res.reason in ("max_steps", "in_band", "overshoot")
    assert len(res.history) == 2 and 0.0 <= res.metrics["accuracy"] <= 1.0
    assert res.threads == 1
    assert torch.get_num_threads() == threads  # the run does not leak its thread setting
    changed = any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert changed


def test_two_phase_run_switches_to_the_mix_once_the_tool_path_is_reliable():
    model, tok = build_tiny_model()
    events = []
    cfg = _quick_config(
        max_steps=7,
        eval_every=3,
        min_tool_accuracy=0.0,  # an untrained model "qualifies": the switch happens at step 3
        min_tool_episodes=0,
        mix_tool_fraction=0.0,
        mix_eval_every=2,
        mix_max_steps=4,
        band=(1.0, 1.0),  # unreachable: the run goes to the mix phase's budget
    )
    res = warm_start(model, tok, cfg, events.append)
    curriculum = [(e["step"], e["curriculum"], e["phase"]) for e in events]
    # the copy phase evaluates every 3 steps; the mix phase every 2 (and at its last step)
    assert curriculum == [
        (1, "copy", "train"), (2, "copy", "train"), (3, "copy", "eval"),
        (4, "mix", "eval"), (5, "mix", "train"), (6, "mix", "eval"), (7, "mix", "eval"),
    ]  # fmt: skip
    assert res.reason == "max_steps" and not res.ok


def test_a_copy_reliable_at_its_last_step_still_gets_its_mix_phase():
    model, tok = build_tiny_model()
    events = []
    cfg = _quick_config(max_steps=3, eval_every=3, min_tool_accuracy=0.0, min_tool_episodes=0,
                        mix_tool_fraction=0.0, mix_eval_every=2, mix_max_steps=2,
                        band=(1.0, 1.0))
    res = warm_start(model, tok, cfg, events.append)
    evals = [(e["step"], e["curriculum"], e["max_steps"]) for e in events if e["phase"] == "eval"]
    assert evals == [(3, "copy", 3), (4, "mix", 5), (5, "mix", 5)]
    assert res.steps == 5 and res.reason == "max_steps"


def test_a_build_that_misses_its_target_fails_loudly_and_saves_nothing(tmp_path, monkeypatch):
    import dataclasses

    from rltune.models import recipes
    from rltune.models.registry import ensure_demo_model
    from rltune.sdk.errors import BuildError

    nano = recipes.RECIPES["nano"]
    hopeless = dataclasses.replace(  # 3 steps of an unreachable target
        nano, config=_quick_config(max_steps=3, eval_every=3, band=(1.0, 1.0))
    )
    monkeypatch.setitem(recipes.RECIPES, "nano", hopeless)
    with pytest.raises(BuildError) as err:
        ensure_demo_model("nano", home=tmp_path)
    assert "missed its target" in str(err.value) and "max_steps" in str(err.value)
    assert set(err.value.metrics) >= {"accuracy", "tool_rate", "tool_accuracy"}
    assert not (tmp_path / "models" / "nano").exists()


def test_copy_friendly_init_passes_what_a_head_attends_to():
    import torch

    from rltune.models.factory import build_model, copy_friendly_init

    model, tok = build_tiny_model()
    copy_friendly_init(model, gain=1.0)
    cfg = model.config
    hd = cfg.hidden_size // cfg.num_attention_heads
    attn = model.model.layers[0].self_attn
    v = attn.v_proj.weight[:hd]  # kv head 0: rows are an orthonormal basis
    torch.testing.assert_close(v @ v.T, torch.eye(hd), atol=1e-5, rtol=0)
    per_group = cfg.num_attention_heads // cfg.num_key_value_heads
    ov = sum(attn.o_proj.weight[:, h * hd : (h + 1) * hd] for h in range(per_group)) @ v
    x = v.T @ torch.randn(hd)  # a vector in the head's subspace passes unchanged
    torch.testing.assert_close(ov @ x, x, atol=1e-5, rtol=0)
    # build_model applies it, seeded: same seed, same weights
    a = build_model("tiny", tok, seed=3, copy_gain=0.3).state_dict()
    b = build_model("tiny", tok, seed=3, copy_gain=0.3).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_nano_builds_into_the_band(nano_build):
    from transformers import AutoModelForCausalLM

    from rltune.models import load_tokenizer

    if isinstance(nano_build, Exception):  # the one test that fails on a missed warm start
        pytest.fail(f"{nano_build}\nmetrics: {getattr(nano_build, 'metrics', {})}")
    nano_model_dir = nano_build

    meta = read_meta(nano_model_dir)
    lo, hi = meta["target_band"]
    assert lo <= meta["heldout_accuracy"] <= hi
    # RL headroom is the tool decision: the tool path is reliable when taken (the recipe's
    # copy phase ends at >= 0.9 sampled; the mix phase may shave a little), memory is not
    m = meta["heldout_metrics"]
    assert m["tool_accuracy"] >= 0.8 > m["direct_accuracy"] + 0.3
    assert meta["stop_reason"] == "in_band"
    model = AutoModelForCausalLM.from_pretrained(nano_model_dir)
    tok = load_tokenizer(nano_model_dir)
    assert model.num_parameters() == meta["parameters"]
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")
