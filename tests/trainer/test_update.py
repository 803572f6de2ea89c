"""PolicyUpdater on a throwaway tiny Qwen2: parameters move, rewarded sequences become
likelier, micro-batching is exact, and resuming from a checkpoint reproduces the next step."""

from __future__ import annotations

import math

import pytest
import torch

from rltune.config import HyperParameters, resolve_algorithm
from rltune.trainer.checkpoint import (
    list_checkpoints,
    read_trainer_state,
    restore_training_state,
    save_checkpoint,
)
from rltune.trainer.logprobs import pad_rows, token_logprobs_BT
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import PolicyUpdater, TrainingRow, mini_batches, staleness_lr_scale

torch.set_num_threads(1)

GOOD = [1, 5, 6, 7, 8]
BAD = [1, 5, 9, 10, 11]
MASK = [0, 0, 1, 1, 1]


def _rows(second_prompt: int = 5) -> list[TrainingRow]:
    good2 = [1, second_prompt, 6, 7, 8]
    bad2 = [1, second_prompt, 9, 10, 11]
    return [TrainingRow(GOOD, MASK, 1.0, "a"), TrainingRow(BAD, MASK, -1.0, "b"),
            TrainingRow(good2, MASK, 1.0, "c"), TrainingRow(bad2, MASK, -1.0, "d")]


def _updater(model, total_steps=10, reference=None, **hp_kw) -> PolicyUpdater:
    hp = HyperParameters(**{"algorithm": "grpo", "learning_rate": 1e-3, "n_rollouts": 2,
                            "batch_size": 2, **hp_kw})
    return PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=total_steps,
                         reference_model=reference)


def _seq_logp(model, ids) -> float:
    t, attn = pad_rows([ids])
    with torch.no_grad():
        logp, _ = token_logprobs_BT(model, t, attn)
    return float((logp * torch.tensor([MASK], dtype=torch.float32)).sum())


def test_every_trainable_parameter_changes_after_one_step():
    model = tiny_qwen2()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    metrics = _updater(model).update(_rows())
    unchanged = [n for n, p in model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/ppo_kl", "actor/entropy",
                "actor/pg_clipfrac", "actor/grad_norm", "actor/lr", "critic/advantages/mean"):
        assert key in metrics
    assert metrics["actor/grad_norm"] > 0 and metrics["actor/entropy"] > 0
    assert metrics["actor/ppo_kl"] == pytest.approx(0.0, abs=1e-6)  # one on-policy update


@pytest.mark.parametrize("algorithm", ["grpo", "gspo", "dapo"])
def test_rewarded_sequences_become_likelier(algorithm):
    model = tiny_qwen2(seed=1)
    good0, bad0 = _seq_logp(model, GOOD), _seq_logp(model, BAD)
    # GSPO's tiny clip range needs single on-policy updates to move (ratio = 1 each step).
    up = _updater(model, learning_rate=3e-3, algorithm=algorithm)
    for _ in range(5):
        up.update(_rows())
    assert _seq_logp(model, GOOD) > good0 + 0.5
    assert _seq_logp(model, BAD) < bad0 - 0.5


def test_micro_batching_and_mini_batches():
    rows = _rows(second_prompt=4)
    a, b = tiny_qwen2(seed=2), tiny_qwen2(seed=2)
    ma = _updater(a, micro_batch_size=None).update(rows)
    mb = _updater(b, micro_batch_size=1).update(rows)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.allclose(pa, pb, atol=1e-5)
    assert ma["actor/pg_loss"] == pytest.approx(mb["actor/pg_loss"], abs=1e-5)
    # ppo_mini_batch_size=2 rollouts → 4 rollouts give two optimizer steps.
    m = _updater(tiny_qwen2(), ppo_mini_batch_size=2).update(rows)
    assert m["actor/num_mini_batches"] == 2.0
    assert m["actor/ppo_kl"] != 0.0  # the second mini-batch sees a moved policy


def test_a_rollouts_rows_share_its_mini_batch_wherever_they_sit():
    # A rollout split by context breaks has rows apart from each other (PPO's critic and the
    # policy update split alike): each rollout counts once, in the order it first appears.
    ids = ["a", "b", "a", "c", "d", "c", "e"]
    rows = [TrainingRow(GOOD, MASK, 0.0, rid) for rid in ids]
    assert mini_batches(rows, 2) == [[0, 1, 2], [3, 4, 5], [6]]
    assert mini_batches(rows, 1) == [[0, 2], [1], [3, 5], [4], [6]]
    assert mini_batches([], 2) == []
    with pytest.raises(ValueError, match="rollouts_per_mini_batch must be >= 1"):
        mini_batches(rows, 0)


def test_multi_row_rollout_and_per_token_advantage_and_mismatch():
    rows = [TrainingRow(GOOD, MASK, 1.0, "a"), TrainingRow(BAD, MASK, 1.0, "a"),
            TrainingRow([1, 4, 6, 7, 8], MASK, -1.0, "b",
                        rollout_logprobs=[0.0, 0.0, -3.0, -3.0, -3.0])]
    m = _updater(tiny_qwen2()).update(rows)
    assert "training/rollout_probs_diff_mean" in m
    hp = HyperParameters(learning_rate=1e-3, algorithm="opd")
    up = PolicyUpdater(tiny_qwen2(), hp, resolve_algorithm(hp, "pg_opd"), total_steps=1)
    m = up.update([TrainingRow(GOOD, MASK, [0.0, 0.0, 0.5, -1.0, 0.2], "a")])
    assert m["critic/advantages/max"] == 0.5 and m["actor/pg_clipfrac"] == 0.0


@pytest.mark.parametrize("mini_batch", [None, 2])
def test_skipping_zero_advantage_rows_changes_no_weight(mini_batch):
    # The skipped rows still count in the loss normaliser, so the update must equal the one
    # that runs them; a mini-batch of inert rows only must still step Adam with zero grads.
    rows = [*_rows(), TrainingRow([1, 7, 6, 9, 8], MASK, 0.0, "e"),
            TrainingRow([1, 7, 9, 6, 8], MASK, 0.0, "f")]
    kw = {"n_rollouts": 3, "ppo_mini_batch_size": mini_batch, "algorithm": "gspo"}
    models, metrics = [], []
    for skip in (True, False):
        model = tiny_qwen2()
        up = _updater(model, **kw)
        up.skip_inert_rows = skip
        for _ in range(2):
            metrics.append(up.update(rows))
        models.append(model)
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert metrics[0]["actor/pg_loss"] == pytest.approx(metrics[2]["actor/pg_loss"], abs=1e-6)


def test_bad_rows_are_rejected():
    with pytest.raises(ValueError, match="same length"):
        TrainingRow([1, 2, 3], [0, 1], 1.0, "a")
    with pytest.raises(ValueError, match="loss_mask\\[0\\]"):
        TrainingRow([1, 2], [1, 1], 1.0, "a")
    with pytest.raises(ValueError, match="old_logprobs"):
        TrainingRow([1, 2], [0, 1], 1.0, "a", old_logprobs=[0.0])


def test_bf16_autocast_runs():
    m = _updater(tiny_qwen2(), bf16=True).update(_rows())
    assert torch.isfinite(torch.tensor(m["actor/pg_loss"]))


def test_resume_reproduces_the_next_step(tmp_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = tiny_qwen2(seed=3)
    reference = tiny_qwen2(seed=3)  # the frozen base model, kept for the KL term
    hp_kw = {"lr_scheduler_type": "cosine", "lr_warmup_steps": 1, "kl_loss_coef": 0.5}
    up = _updater(base, total_steps=4, reference=reference, **hp_kw)
    up.update(_rows())
    ckpt = save_checkpoint(tmp_path / "ckpts", step=1, model=base, updater=up,
                           trainer_state={"epoch": 0, "sampler": {"position": 2}})
    step2 = up.update(_rows(second_prompt=4))
    after = {n: p.detach().clone() for n, p in base.named_parameters()}

    resumed = AutoModelForCausalLM.from_pretrained(ckpt)
    up2 = _updater(resumed, total_steps=4, reference=tiny_qwen2(seed=3), **hp_kw)
    state = restore_training_state(ckpt, up2)
    assert state["sampler"] == {"position": 2} and state["step"] == 1 and up2.step == 1
    again = up2.update(_rows(second_prompt=4))
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/lr"):
        assert again[key] == pytest.approx(step2[key], rel=1e-6, abs=1e-7), key
    for n, p in resumed.named_parameters():
        assert torch.allclose(p, after[n], atol=1e-6), n


def test_checkpoint_rotation_and_rng(tmp_path):
    import random

    model = tiny_qwen2()
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step=step, model=model, save_total_limit=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-2", "checkpoint-3"]
    random.seed(7)
    torch.manual_seed(7)
    save_checkpoint(tmp_path, step=4, model=model, save_total_limit=2)
    expected = (random.random(), torch.rand(1).item())
    restore_training_state(tmp_path / "checkpoint-4")
    assert (random.random(), torch.rand(1).item()) == expected
    assert read_trainer_state(tmp_path / "checkpoint-4")["step"] == 4
    assert not any(p.name.startswith(".tmp") for p in tmp_path.iterdir())


def test_off_policy_update_weighs_tokens_by_the_behaviour_weight():
    """max_staleness 1: rows sampled by the current weights update exactly as the synchronous
    loss does (w = 1); rows sampled by older weights are reweighted and the weights reported."""
    rows = _rows()
    probe = _updater(tiny_qwen2())
    old = probe.compute_logprobs(rows)
    for r, lp in zip(rows, old, strict=True):
        r.old_logprobs, r.rollout_logprobs = lp, list(lp)
    sync_model, async_model = tiny_qwen2(), tiny_qwen2()
    m_sync = _updater(sync_model).update(rows)
    m_async = _updater(async_model, max_staleness=1).update(rows)
    assert m_async["actor/pg_loss"] == pytest.approx(m_sync["actor/pg_loss"], rel=1e-6)
    assert m_async["fully_async/behaviour_weight/mean"] == pytest.approx(1.0)
    assert "fully_async/behaviour_weight/mean" not in m_sync
    for a, b in zip(sync_model.parameters(), async_model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)

    # every token was sampled 0.3 nats less likely than the policy now finds it: w = e^0.3
    # on each, so the whole gradient (before clipping) is e^0.3 times the on-policy one
    for r in rows:
        r.rollout_logprobs = [x - 0.3 * m for x, m in zip(r.old_logprobs, r.loss_mask,
                                                          strict=True)]
    m_stale = _updater(tiny_qwen2(), max_staleness=1).update(rows)
    assert m_stale["fully_async/behaviour_weight/mean"] == pytest.approx(math.exp(0.3), rel=1e-5)
    assert m_stale["actor/grad_norm"] == pytest.approx(
        math.exp(0.3) * m_sync["actor/grad_norm"], rel=1e-4)


def test_gspo_off_policy_weight_is_each_sequences_likelihood_ratio():
    """GSPO at max_staleness 1: every sampled token (3 a row) 0.1 nats likelier under the
    policy than when it was sampled, so each sequence is e^0.3 likelier: that is its weight
    (the length-normalised mean would have given e^0.1)."""
    rows = _rows()
    probe = _updater(tiny_qwen2(), algorithm="gspo")
    for r, lp in zip(rows, probe.compute_logprobs(rows), strict=True):
        r.old_logprobs = lp
        r.rollout_logprobs = [x - 0.1 * m for x, m in zip(lp, r.loss_mask, strict=True)]
    m = _updater(tiny_qwen2(), algorithm="gspo", max_staleness=1).update(rows)
    assert m["fully_async/behaviour_weight/mean"] == pytest.approx(math.exp(0.3), rel=1e-5)
    assert m["fully_async/behaviour_weight/capped_frac"] == 0.0


def test_off_policy_update_drops_tokens_drifted_beyond_the_bound():
    """A sampled token whose behaviour log-prob is more than log 2 from the policy's leaves the
    loss: the step equals the one on rows whose loss mask leaves that token out, and
    ``masked_frac`` counts it (1 of 12 sampled tokens)."""
    rows = _rows()
    probe = _updater(tiny_qwen2())
    for r, lp in zip(rows, probe.compute_logprobs(rows), strict=True):
        r.old_logprobs, r.rollout_logprobs = lp, list(lp)
    far = [TrainingRow(r.input_ids, list(r.loss_mask), r.advantage, r.rollout_id,
                       list(r.old_logprobs), list(r.rollout_logprobs)) for r in rows]
    far[1].rollout_logprobs[3] += 1.0  # sampled e^1 = 2.7x likelier than the policy finds it
    cut = [TrainingRow(r.input_ids, list(r.loss_mask), r.advantage, r.rollout_id,
                       list(r.old_logprobs), list(r.rollout_logprobs)) for r in rows]
    cut[1].loss_mask[3] = 0
    cut[1].rollout_logprobs[3] = cut[1].old_logprobs[3]
    far_model, cut_model = tiny_qwen2(), tiny_qwen2()
    # GRPO's token-level ratio, seq-mean-token-mean: the masked token leaves its row's mean
    m_far = _updater(far_model, max_staleness=2).update(far)
    m_cut = _updater(cut_model, max_staleness=2).update(cut)
    assert m_far["fully_async/behaviour_weight/masked_frac"] == pytest.approx(1 / 12)
    assert m_cut["fully_async/behaviour_weight/masked_frac"] == 0.0
    assert m_far["actor/pg_loss"] == pytest.approx(m_cut["actor/pg_loss"], rel=1e-6)
    for a, b in zip(far_model.parameters(), cut_model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)
    # with the mask off the far token trains (weight e^-1) and the step differs
    off = _updater(tiny_qwen2(), max_staleness=2)
    off.behaviour_bound = math.inf
    assert off.update(far)["fully_async/behaviour_weight/masked_frac"] == 0.0
    assert any(not torch.allclose(a, b, atol=1e-7)
               for a, b in zip(off.model.parameters(), cut_model.parameters(), strict=True))


def test_scale_lr_by_staleness_takes_the_step_at_the_scaled_rate():
    """``scale_lr_by_staleness``: rows one version old on average (1 of 3 sampled tokens per
    row at staleness 3) step at lr / 2, the same step as an update at half the rate; the
    schedule's own rate is back for the next update."""
    rows = _rows()
    for r in rows:
        r.staleness = 1.0
    fresh = [TrainingRow(r.input_ids, list(r.loss_mask), r.advantage, r.rollout_id)
             for r in rows]
    flat = {"max_staleness": 2, "lr_warmup_steps": 0}  # the constant schedule's 1e-3 from step 0
    scaled = _updater(tiny_qwen2(), scale_lr_by_staleness=True, **flat)
    half = _updater(tiny_qwen2(), learning_rate=5e-4, **flat)
    m_scaled, m_half = scaled.update(rows), half.update(fresh)
    assert m_scaled["fully_async/lr_scale"] == pytest.approx(0.5)
    assert m_scaled["actor/lr"] == m_half["actor/lr"] == pytest.approx(5e-4)
    for a, b in zip(scaled.model.parameters(), half.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)
    assert scaled.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    assert scaled.update(fresh)["fully_async/lr_scale"] == 1.0
    # off (the default): stale rows step at the schedule's rate
    plain = _updater(tiny_qwen2(), **flat).update(rows)
    assert plain["fully_async/lr_scale"] == 1.0 and plain["actor/lr"] == pytest.approx(1e-3)


def test_staleness_lr_scale_is_the_token_weighted_mean_age():
    a = TrainingRow([1, 2, 3, 4], [0, 1, 1, 1], 1.0, "a", staleness=2.0)  # 3 tokens at 2
    b = TrainingRow([1, 2], [0, 1], 1.0, "b", staleness=0.0)              # 1 token at 0
    assert staleness_lr_scale([a, b]) == pytest.approx(1 / (1 + 6 / 4))
    assert staleness_lr_scale([b]) == 1.0
