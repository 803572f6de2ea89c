"""Loss pieces against hand-computed values."""

import math

import pytest
import torch

from rltune.trainer.losses import (
    BEHAVIOUR_LOG_RATIO_BOUND,
    BEHAVIOUR_WEIGHT_CAP,
    agg_normalizer,
    aggregate_loss,
    behaviour_keep_BT,
    behaviour_weight_BT,
    dpo_loss_B,
    importance_ratio_BT,
    kl_penalty_BT,
    masked_mean,
    ppo_clip_loss_BT,
)

LOGP = torch.tensor([[0.0, -1.0, -2.0]])
OLD = torch.tensor([[0.0, -1.2, -1.6]])
MASK = torch.tensor([[0.0, 1.0, 1.0]])


def test_token_ratio():
    r = importance_ratio_BT(LOGP, OLD, MASK, "token")
    # log ratios 0.2 and -0.4 on the masked tokens; position 0 masked → exp(0).
    assert r.tolist()[0] == pytest.approx([1.0, math.exp(0.2), math.exp(-0.4)])


def test_gspo_sequence_ratio_is_exp_of_mean_token_log_ratio():
    r = importance_ratio_BT(LOGP, OLD, MASK, "sequence")
    expected = math.exp((0.2 - 0.4) / 2)  # 0.904837
    assert r.tolist()[0] == pytest.approx([expected] * 3)
    # The gradient flows through the mean: d r / d logp_t = r / |y| on masked tokens.
    logp = LOGP.clone().requires_grad_(True)
    importance_ratio_BT(logp, OLD, MASK, "sequence")[0, 0].backward()
    assert logp.grad.tolist()[0] == pytest.approx([0.0, expected / 2, expected / 2])


def test_asymmetric_clipping():
    ratio = torch.tensor([[0.5, 1.0, 1.5]])
    loss, clipped = ppo_clip_loss_BT(ratio, torch.ones(1, 3), 0.2, 0.28)
    # -A·r = [-0.5, -1, -1.5]; -A·clip = [-0.8, -1, -1.28]; max → [-0.5, -1, -1.28].
    assert loss.tolist()[0] == pytest.approx([-0.5, -1.0, -1.28])
    assert clipped.tolist()[0] == [False, False, True]
    loss, clipped = ppo_clip_loss_BT(ratio, -torch.ones(1, 3), 0.2, 0.28)
    # A<0: [0.5, 1, 1.5] vs [0.8, 1, 1.28] → [0.8, 1, 1.5].
    assert loss.tolist()[0] == pytest.approx([0.8, 1.0, 1.5])
    assert clipped.tolist()[0] == [True, False, False]


def test_gspo_clip_range_and_dual_clip_and_no_clip():
    r = torch.tensor([[0.904837]])
    loss, clipped = ppo_clip_loss_BT(r, torch.tensor([[-1.0]]), 3e-4, 4e-4)
    assert loss.item() == pytest.approx(0.9997) and clipped.item()
    loss, _ = ppo_clip_loss_BT(torch.tensor([[4.0]]), torch.tensor([[-1.0]]), 0.2, 0.2,
                               clip_c=3.0)
    assert loss.item() == pytest.approx(3.0)  # max(4, 1.2) = 4, capped at c·|A| = 3
    loss, clipped = ppo_clip_loss_BT(torch.tensor([[4.0]]), torch.tensor([[2.0]]), None, None)
    assert loss.item() == -8.0 and not clipped.item()


def test_aggregation_modes():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert aggregate_loss(loss, mask, "token-mean").item() == pytest.approx(10 / 4)
    assert aggregate_loss(loss, mask, "seq-mean-token-mean").item() == pytest.approx(3.0)
    assert aggregate_loss(loss, mask, "seq-mean").item() == pytest.approx(3.0)
    assert aggregate_loss(loss, mask, "seq-mean-token-sum").item() == pytest.approx(5.0)
    assert agg_normalizer(mask, "token-mean") == 4 and agg_normalizer(mask, "seq-mean") == 2


def test_per_rollout_normalisation():
    # Rows 0 and 1 belong to one rollout (weight 1/2 each), row 2 to another (weight 1).
    loss = torch.tensor([[2.0, 2.0], [4.0, 4.0], [6.0, 6.0]])
    mask = torch.ones(3, 2)
    w = torch.tensor([0.5, 0.5, 1.0])
    # (0.5·2 + 0.5·4 + 1·6) / (0.5 + 0.5 + 1) = 9 / 2
    assert aggregate_loss(loss, mask, "seq-mean-token-mean", row_weight_B=w).item() == 4.5
    # Without weights the split rollout would count twice: (2 + 4 + 6) / 3 = 4.
    assert aggregate_loss(loss, mask, "seq-mean-token-mean").item() == 4.0


def test_masks_and_micro_batch_normaliser():
    loss = torch.tensor([[1.0, 100.0], [3.0, 100.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert aggregate_loss(loss, mask, "token-mean").item() == 2.0  # masked 100s ignored
    # Splitting into micro-batches with the mini-batch normaliser sums to the whole.
    parts = [aggregate_loss(loss[i:i + 1], mask[i:i + 1], "token-mean", normalizer=2.0)
             for i in range(2)]
    assert sum(p.item() for p in parts) == 2.0
    # A row with no sampled token does not dilute seq-mean.
    mask2 = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    assert aggregate_loss(loss, mask2, "seq-mean-token-mean").item() == 1.0
    assert masked_mean(torch.ones(2), torch.zeros(2)).item() == 0.0


def test_kl_estimators():
    logp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])  # log ratio 0.5
    assert kl_penalty_BT(logp, ref, "k1").item() == pytest.approx(0.5)
    assert kl_penalty_BT(logp, ref, "k2").item() == pytest.approx(0.125)
    assert kl_penalty_BT(logp, ref, "k3").item() == pytest.approx(math.exp(-0.5) + 0.5 - 1)
    assert kl_penalty_BT(ref, ref, "k3").item() == 0.0


# --- off-policy correction (max_staleness >= 1): decoupled PPO, truncated behaviour weight ---
BEHAV = torch.tensor([[0.0, -1.5, -1.0]])  # what the engine recorded when it sampled


def test_behaviour_weight_per_token_and_per_sequence():
    w, capped = behaviour_weight_BT(LOGP, BEHAV, MASK, "token")
    # log w = prox - behav = 0.5 and -1.0 on the sampled tokens; position 0 is masked → 1.
    assert w.tolist()[0] == pytest.approx([1.0, math.exp(0.5), math.exp(-1.0)])
    assert capped.tolist() == [[False, False, False]]
    w, _ = behaviour_weight_BT(LOGP, BEHAV, MASK, "sequence")
    # GSPO: the sequence's likelihood ratio exp(0.5 - 1.0) = exp(-0.5) on every sampled token
    assert w.tolist()[0] == pytest.approx([1.0, math.exp(-0.5), math.exp(-0.5)])


def test_sequence_behaviour_weight_is_the_product_not_the_geometric_mean():
    """A 20-token answer the policy has moved away from by 0.05 nats a token since it was
    sampled: its likelihood is e^-1 of what it was, so that is its weight (GSPO's length-
    normalised mean would give e^-0.05 = 0.95 and count it almost fully)."""
    mask = torch.tensor([[0.0] + [1.0] * 20 + [0.0, 0.0]])
    behav = torch.zeros_like(mask)
    prox = -0.05 * mask + 3.0 * (1 - mask)  # unsampled positions never count
    w, capped = behaviour_weight_BT(prox, behav, mask, "sequence")
    assert w[0, 1:21].tolist() == pytest.approx([math.exp(-1.0)] * 20, rel=1e-5)
    assert w[0, 0].item() == 1.0 and w[0, 21:].tolist() == [1.0, 1.0]
    assert not capped.any()
    # and one moved towards by 0.05 a token: e^1 = 2.7, truncated at the cap
    w, capped = behaviour_weight_BT(-prox, behav, mask, "sequence")
    assert w[0, 1:21].tolist() == pytest.approx([BEHAVIOUR_WEIGHT_CAP] * 20)
    assert capped[0, 1:21].all() and not capped[0, 0]


def test_behaviour_weight_is_truncated_at_the_cap():
    assert BEHAVIOUR_WEIGHT_CAP == 2.0
    w, capped = behaviour_weight_BT(LOGP, torch.tensor([[0.0, -3.0, -2.0]]), MASK, "token")
    # log w = 2.0 (e^2 = 7.39, truncated to 2) and 0.0
    assert w.tolist()[0] == pytest.approx([1.0, 2.0, 1.0])
    assert capped.tolist() == [[False, True, False]]
    w, capped = behaviour_weight_BT(LOGP, BEHAV, MASK, "token", cap=1.5)
    assert w.tolist()[0] == pytest.approx([1.0, 1.5, math.exp(-1.0)])
    assert capped.tolist() == [[False, True, False]]


def test_tokens_drifted_beyond_the_bound_leave_the_off_policy_loss():
    assert math.log(2.0) == pytest.approx(BEHAVIOUR_LOG_RATIO_BOUND)
    prox = torch.tensor([[0.0, -1.0, -2.0, -0.5, -3.0, -1.0]])
    behav = torch.tensor([[0.0, -1.5, -1.0, -1.2, -2.0, -1.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
    # |prox - behav| = 0.5, 1.0, 0.7, 1.0 on the sampled tokens; log 2 = 0.693: the first stays
    # (ratio e^0.5 = 1.65 < 2), the second leaves (the policy now finds it e^1 = 2.7x less
    # likely), the third leaves (e^0.7 = 2.01x likelier: just past 2), the fourth leaves;
    # masked positions stay 0 whatever their log-probs
    keep = behaviour_keep_BT(prox, behav, mask)
    assert keep.tolist() == [[0.0, 1.0, 0.0, 0.0, 0.0, 0.0]]
    assert keep.dtype == mask.dtype
    keep = behaviour_keep_BT(prox, behav, mask, bound=0.75)  # x2.12: the third comes back
    assert keep.tolist() == [[0.0, 1.0, 0.0, 1.0, 0.0, 0.0]]
    # GSPO's sequence-level weight then multiplies the kept tokens' ratios only:
    # exp(-0.5 - 0.7) (signs flipped: under the cap)
    w, _ = behaviour_weight_BT(-prox, -behav, keep, "sequence")
    assert w.tolist()[0] == pytest.approx([1.0, math.exp(-1.2), 1.0, math.exp(-1.2), 1.0, 1.0])
    assert behaviour_keep_BT(prox, behav, mask, bound=math.inf).tolist() == mask.tolist()


def test_decoupled_ppo_loss_against_hand_computed_values():
    ratio = torch.tensor([[1.0, 1.1, 0.7]], requires_grad=True)  # pi_theta / pi_prox
    adv = torch.tensor([[0.0, 1.0, -1.0]])
    w = torch.tensor([[1.0, 1.5, 0.5]], requires_grad=True)
    loss, clipped = ppo_clip_loss_BT(ratio, adv, 0.2, 0.2, behaviour_weight_BT=w)
    # token 1: A=1, r=1.1 inside [0.8, 1.2]: -1.1, x1.5 = -1.65
    # token 2: A=-1, r=0.7 below 0.8: max(0.7, 0.8) = 0.8 (clipped), x0.5 = 0.4
    assert loss.tolist()[0] == pytest.approx([0.0, -1.65, 0.4])
    assert clipped.tolist() == [[False, False, True]]
    (loss * MASK).sum().backward()
    assert ratio.grad.tolist()[0] == pytest.approx([0.0, -1.5, 0.0])  # -A·w; clipped → 0
    assert w.grad is None  # the behaviour weight is a constant of the loss
    # fresh samples (w = 1): exactly the PPO clip loss
    plain, _ = ppo_clip_loss_BT(ratio.detach(), adv, 0.2, 0.2)
    same, _ = ppo_clip_loss_BT(ratio.detach(), adv, 0.2, 0.2,
                              behaviour_weight_BT=torch.ones_like(adv))
    assert torch.equal(plain, same)


def test_decoupled_correction_of_a_rollout_spanning_three_versions():
    """max_staleness 2 with partial rollouts: one row whose tokens were sampled by versions
    v-2, v-1 and v (the engine's recorded log-probs) is corrected token by token towards the
    policy the update starts from (prox), and clipped around prox, not around the behaviour."""
    prox = torch.tensor([[0.0, -0.5, -1.0, -0.2]])
    behav = torch.tensor([[0.0, -1.2, -0.9, -0.2]])  # v-2 (less likely then), v-1, v (same)
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    w, capped = behaviour_weight_BT(prox, behav, mask, "token")
    # log w = 0.7, -0.1, 0.0 → e^0.7 = 2.01 (capped at 2), e^-0.1, 1
    assert w.tolist()[0] == pytest.approx([1.0, 2.0, math.exp(-0.1), 1.0])
    assert capped.tolist() == [[False, True, False, False]]
    w_seq, _ = behaviour_weight_BT(prox, behav, mask, "sequence")
    assert w_seq.tolist()[0][1:] == pytest.approx([math.exp(0.6)] * 3)  # exp(.7 - .1 + 0)
    logp = torch.tensor([[0.0, -0.4, -1.0, -0.5]])  # the policy during the update
    ratio = importance_ratio_BT(logp, prox, mask, "token")  # e^0.1, 1, e^-0.3
    adv = torch.tensor([[0.0, 1.0, 1.0, -1.0]])
    loss, clipped = ppo_clip_loss_BT(ratio, adv, 0.2, 0.2, behaviour_weight_BT=w)
    # token 1: r = 1.105 (inside), -A·r·w = -1.105 x 2; token 2: -1 x e^-0.1;
    # token 3: A = -1, r = 0.741 below 0.8 → max(0.741, 0.8) = 0.8, x 1
    assert loss.tolist()[0][1:] == pytest.approx(
        [-math.exp(0.1) * 2.0, -math.exp(-0.1), 0.8])
    assert clipped.tolist() == [[False, False, False, True]]


# ---- DPO: policy / reference sequence log-probs of two pairs, by hand ----
#   pair 0: chosen -5 (ref -6), rejected -9 (ref -8): h = 1 - (-1) = 2
#   pair 1: chosen -4 (ref -3), rejected -7 (ref -7): h = -1 - 0 = -1
DPO_IN = (torch.tensor([-5.0, -4.0]), torch.tensor([-9.0, -7.0]),
          torch.tensor([-6.0, -3.0]), torch.tensor([-8.0, -7.0]))


def _log_sigmoid(x):
    return -math.log1p(math.exp(-x))


def test_dpo_sigmoid_loss_and_rewards_by_hand():
    loss, chosen, rejected = dpo_loss_B(*DPO_IN, beta=0.5)
    assert loss.tolist() == pytest.approx([-_log_sigmoid(1.0), -_log_sigmoid(-0.5)])
    assert chosen.tolist() == pytest.approx([0.5, -0.5])  # beta x (logp - ref)
    assert rejected.tolist() == pytest.approx([-0.5, 0.0])
    assert not chosen.requires_grad


def test_dpo_label_smoothing_and_ipo_by_hand():
    loss, _, _ = dpo_loss_B(*DPO_IN, beta=0.5, label_smoothing=0.25)
    want = [-0.75 * _log_sigmoid(1.0) - 0.25 * _log_sigmoid(-1.0),
            -0.75 * _log_sigmoid(-0.5) - 0.25 * _log_sigmoid(0.5)]
    assert loss.tolist() == pytest.approx(want)
    loss, _, _ = dpo_loss_B(*DPO_IN, beta=0.5, loss_type="ipo")  # (h - 1/(2 beta))^2
    assert loss.tolist() == pytest.approx([(2 - 1) ** 2, (-1 - 1) ** 2])


def test_dpo_gradient_raises_chosen_and_lowers_rejected():
    chosen = torch.tensor([-5.0], requires_grad=True)
    rejected = torch.tensor([-9.0], requires_grad=True)
    loss, _, _ = dpo_loss_B(chosen, rejected, torch.tensor([-6.0]), torch.tensor([-8.0]),
                            beta=0.5)
    loss.sum().backward()
    # d/dc -log sigmoid(beta h) = -beta sigmoid(-beta h); the rejected one gets the opposite
    g = 0.5 / (1 + math.exp(1.0))
    assert (chosen.grad.item(), rejected.grad.item()) == pytest.approx((-g, g))
