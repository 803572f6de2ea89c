"""The PPO-clip core shared by GRPO, GSPO, DAPO and OPD, and DPO's loss: pure torch functions.

Token positions are aligned with ``input_ids``: ``logp_BT[b, t]`` is the log-prob of token
``t`` given tokens ``< t`` (position 0 is unused and masked out).

Example:
    >>> import torch
    >>> logp = torch.tensor([[0.0, -1.0, -2.0]]); old = torch.tensor([[0.0, -1.1, -1.9]])
    >>> mask = torch.tensor([[0.0, 1.0, 1.0]])
    >>> round(importance_ratio_BT(logp, old, mask, "sequence")[0, 1].item(), 6)  # exp(0)
    1.0
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from rltune.names import DpoLossType, ImportanceLevel, KLEstimator, LossAggMode


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: Optional[int] = None) -> torch.Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: Optional[int] = None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` is 1 (0 when the mask is empty, never NaN)."""
    return masked_sum(x, mask, dim) / mask.sum(dim).clamp(min=1)


def importance_ratio_BT(
    logp_BT: torch.Tensor,
    old_logp_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    level: ImportanceLevel = "token",
) -> torch.Tensor:
    """Importance ratio per token position.

    ``token``: ``exp(logp - old)`` per token (GRPO, DAPO). ``sequence`` (GSPO):
    ``exp(mean_t(logp - old))`` over the row's masked tokens, the same value at every position;
    the gradient flows through the mean, so each token gets ``1/|y|`` of the sequence signal.
    """
    log_ratio_BT = (logp_BT - old_logp_BT) * mask_BT
    if level == "token":
        return torch.exp(log_ratio_BT)
    seq_log_ratio_B = masked_mean(log_ratio_BT, mask_BT, dim=-1)
    return torch.exp(seq_log_ratio_B).unsqueeze(-1).expand_as(logp_BT)


def ppo_clip_loss_BT(
    ratio_BT: torch.Tensor,
    adv_BT: torch.Tensor,
    clip_low: Optional[float],
    clip_high: Optional[float],
    clip_c: Optional[float] = None,
    behaviour_weight_BT: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate (to minimise) with asymmetric ε, and where clipping was active.

    ``loss = max(-A·r, -A·clip(r, 1-ε_low, 1+ε_high))``; ``clip_c`` adds dual clipping for
    A < 0 (loss capped at ``-A·c``). ``clip_low = clip_high = None`` disables clipping.

    **Decoupled PPO** (stale samples): ``behaviour_weight_BT`` (``behaviour_weight_BT()``,
    no gradient) multiplies the loss, ``w · ppo_clip_loss(pi/pi_prox, A)``; ``ratio_BT`` is
    then ``pi_theta / pi_prox`` (the trust region stays centred on the policy the update
    starts from) and ``w`` corrects for the tokens having been sampled by an older policy.
    With fresh samples w = 1 and this is the plain loss.
    """
    loss_BT, clipped_BT = _clipped_surrogate_BT(ratio_BT, adv_BT, clip_low, clip_high, clip_c)
    if behaviour_weight_BT is not None:
        loss_BT = behaviour_weight_BT.detach() * loss_BT
    return loss_BT, clipped_BT


def _clipped_surrogate_BT(ratio_BT: torch.Tensor, adv_BT: torch.Tensor,
                          clip_low: Optional[float], clip_high: Optional[float],
                          clip_c: Optional[float]) -> tuple[torch.Tensor, torch.Tensor]:
    unclipped_BT = -adv_BT * ratio_BT
    if clip_low is None and clip_high is None:
        return unclipped_BT, torch.zeros_like(ratio_BT, dtype=torch.bool)
    lo = 1.0 - (clip_low if clip_low is not None else float("inf"))
    hi = 1.0 + (clip_high if clip_high is not None else float("inf"))
    clipped_BT = -adv_BT * torch.clamp(ratio_BT, lo, hi)
    loss_BT = torch.maximum(unclipped_BT, clipped_BT)
    was_clipped_BT = clipped_BT > unclipped_BT
    if clip_c is not None:
        dual_BT = -adv_BT * clip_c
        capped_BT = torch.minimum(loss_BT, dual_BT)
        loss_BT = torch.where(adv_BT < 0, capped_BT, loss_BT)
    return loss_BT, was_clipped_BT


#: Largest behaviour weight ``pi_prox / pi_behav`` (truncated importance sampling, C = 2 as
#: in the truncated-IS fix for rollout/trainer mismatch). With one step of staleness the
#: weights sit near 1; the cap only bounds the variance a rare token would otherwise add.
BEHAVIOUR_WEIGHT_CAP = 2.0


def behaviour_weight_BT(
    prox_logp_BT: torch.Tensor,
    behav_logp_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    level: ImportanceLevel = "token",
    cap: float = BEHAVIOUR_WEIGHT_CAP,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoupled PPO's behaviour weight ``min(pi_prox / pi_behav, cap)`` (no gradient), and
    where the cap was active.

    ``prox`` is the policy the update starts from (the trainer's recomputed old log-probs),
    ``behav`` the one that sampled the tokens (the engine's recorded log-probs, possibly an
    older weight version). ``level`` follows the importance ratio: per token, or (GSPO) the
    row's sequence likelihood ratio ``exp(sum_t(prox - behav))``, the same at every position.
    Masked positions get weight 1.

    Not GSPO's length-normalised ``exp(mean_t(...))``: that geometric mean is the right scale
    for the per-step trust region, but as the staleness correction it leaves out a factor
    ``exp((|y| - 1) mean_t(...))``. Two versions behind, a 20-token answer the policy has
    moved away from at 0.05 nats a token has weight e^-1 = 0.37, not e^-0.05 = 0.95; with the
    mean, stale batches kept pushing on answers the policy had already left (a collapse in
    20-step runs at N = 2, benchmarks/RESULTS.md, staleness sweep).
    """
    log_w_BT = ((prox_logp_BT - behav_logp_BT) * mask_BT).detach()
    if level == "sequence":
        log_w_BT = masked_sum(log_w_BT, mask_BT, dim=-1).unsqueeze(-1).expand_as(log_w_BT)
    w_BT = torch.exp(log_w_BT.clamp(max=20.0))
    capped_BT = (w_BT > cap) & (mask_BT > 0)
    w_BT = torch.where(mask_BT > 0, w_BT.clamp(max=cap), torch.ones_like(w_BT))
    return w_BT, capped_BT


#: Largest |log(pi_prox / pi_behav)| of a token that trains under staleness: a token whose
#: probability under the policy the update starts from and under the weights that sampled it
#: differ by more than 2x leaves the loss (masked, counted in
#: ``fully_async/behaviour_weight/masked_frac``). At N = 2 on the nano calculator that is
#: <= 1.1 % of a step's tokens in 10-step runs, up to ~3 % late in 20-step ones; unmasked,
#: they fed a drift that grew to KL 0.14 (benchmarks/RESULTS.md, staleness sweep).
BEHAVIOUR_LOG_RATIO_BOUND = math.log(2.0)


def behaviour_keep_BT(
    prox_logp_BT: torch.Tensor,
    behav_logp_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    bound: float = BEHAVIOUR_LOG_RATIO_BOUND,
) -> torch.Tensor:
    """Which sampled tokens stay in the off-policy loss: ``|prox - behav| <= bound`` per token
    (a float mask, 1 = keep; 0 where ``mask_BT`` is 0).

    Decoupled PPO's behaviour weight corrects for staleness in expectation, but a token the
    policy has moved far from (a large drift over several versions) gets a large gradient of
    its log-prob and a weight that is either truncated (above) or tiny (below); Adam rescales
    the step, so a batch of such tokens still moves the policy a full step. Masking them, in
    both directions, keeps the update on the tokens the correction is accurate for (as
    IcePop's two-sided mask of the train/inference mismatch).
    """
    log_w_BT = (prox_logp_BT - behav_logp_BT).detach()
    return ((log_w_BT.abs() <= bound) & (mask_BT > 0)).to(mask_BT.dtype)


def value_loss_BT(
    values_BT: torch.Tensor,
    old_values_BT: torch.Tensor,
    returns_BT: torch.Tensor,
    clip: Optional[float],
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped value loss (to minimise) per token, and where the clipped term was larger.

    ``loss = ½ max((V - R)², (V_clip - R)²)`` with ``V_clip = V_old + clamp(V - V_old, -c, c)``:
    the critic cannot profit from moving its prediction further than ``c`` from the value the
    rollout was scored with. ``clip = None`` gives the plain ``½ (V - R)²``.
    """
    unclipped_BT = (values_BT - returns_BT).square()
    if clip is None:
        return 0.5 * unclipped_BT, torch.zeros_like(values_BT, dtype=torch.bool)
    clipped_values_BT = old_values_BT + torch.clamp(values_BT - old_values_BT, -clip, clip)
    clipped_BT = (clipped_values_BT - returns_BT).square()
    return 0.5 * torch.maximum(unclipped_BT, clipped_BT), clipped_BT > unclipped_BT


def kl_penalty_BT(
    logp_BT: torch.Tensor, ref_logp_BT: torch.Tensor, estimator: KLEstimator = "k3"
) -> torch.Tensor:
    """Per-token estimate of KL(π || π_ref) from samples of π (Schulman's k1/k2/k3).

    k1 = log r', k2 = ½ (log r')², k3 = exp(-log r') + log r' - 1 with log r' = logp - ref.
    k3 is unbiased and always ≥ 0; it is clamped to [-10, 10] as in verl for stability.
    """
    log_ratio_BT = logp_BT - ref_logp_BT
    if estimator == "k1":
        return log_ratio_BT
    if estimator == "k2":
        return 0.5 * log_ratio_BT.square()
    neg = (-log_ratio_BT).clamp(-20.0, 20.0)
    return (torch.exp(neg) - neg - 1.0).clamp(-10.0, 10.0)


def aggregate_loss(
    loss_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    mode: LossAggMode,
    *,
    row_weight_B: Optional[torch.Tensor] = None,
    normalizer: Optional[float] = None,
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

    * ``token-mean``: Σ loss·mask / Σ mask over the whole batch (DAPO; long answers weigh more).
      A rollout split into several rows already counts exactly as its tokens, so rows are not
      re-weighted.
    * ``seq-mean-token-mean``: each row's token mean, then a (weighted) mean over rows (GRPO).
    * ``seq-mean-token-sum``: each row's token sum, then a mean over rows.
    * ``seq-mean``: the mean over rows of a per-sequence loss (GSPO, whose per-token loss is
      constant within a row; for token losses it equals ``seq-mean-token-mean``).

    ``row_weight_B`` (``1/rows_per_rollout``) makes every rollout count once. ``normalizer``
    overrides the denominator (Σ mask or Σ weights of the whole mini-batch) so that gradient
    accumulation over micro-batches adds up to the mini-batch loss.
    """
    if mode == "token-mean":
        denom = normalizer if normalizer is not None else mask_BT.sum().clamp(min=1)
        return masked_sum(loss_BT, mask_BT) / denom
    if mode in ("seq-mean-token-mean", "seq-mean"):
        row_B = masked_mean(loss_BT, mask_BT, dim=-1)
    elif mode == "seq-mean-token-sum":
        row_B = masked_sum(loss_BT, mask_BT, dim=-1)
    else:
        raise ValueError(f"unknown loss_agg_mode {mode!r}")
    # Rows without any sampled token carry no signal and do not count in the mean.
    present_B = (mask_BT.sum(-1) > 0).to(row_B.dtype)
    weight_B = present_B if row_weight_B is None else row_weight_B.to(row_B.dtype) * present_B
    denom = normalizer if normalizer is not None else weight_B.sum().clamp(min=1e-8)
    return (row_B * weight_B).sum() / denom


def agg_normalizer(
    mask_BT: torch.Tensor, mode: LossAggMode, row_weight_B: Optional[torch.Tensor] = None
) -> float:
    """The denominator ``aggregate_loss`` would use on this (whole mini-)batch."""
    if mode == "token-mean":
        return float(mask_BT.sum().clamp(min=1))
    present_B = (mask_BT.sum(-1) > 0).float()
    weight_B = present_B if row_weight_B is None else row_weight_B.float() * present_B
    return float(weight_B.sum().clamp(min=1e-8))


def dpo_loss_B(
    chosen_logp_B: torch.Tensor,
    rejected_logp_B: torch.Tensor,
    ref_chosen_logp_B: torch.Tensor,
    ref_rejected_logp_B: torch.Tensor,
    *,
    beta: float,
    loss_type: DpoLossType = "sigmoid",
    label_smoothing: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DPO's loss per pair (to minimise; a batch takes the mean) and the implicit rewards of
    the chosen and the rejected response (detached).

    Inputs are each response's log-prob summed over its tokens, under the policy and under the
    frozen reference. With the margin ``h = (c - c_ref) - (r - r_ref)``: ``sigmoid`` is
    ``-(1 - ε) log σ(β h) - ε log σ(-β h)`` (ε = ``label_smoothing``, 0 = the DPO paper's
    loss); ``ipo`` is ``(h - 1 / (2β))²``. The implicit reward of a response is
    ``β (logp - logp_ref)``, so the reward margin is ``β h``.
    """
    chosen_ratio_B = chosen_logp_B - ref_chosen_logp_B
    rejected_ratio_B = rejected_logp_B - ref_rejected_logp_B
    margin_B = chosen_ratio_B - rejected_ratio_B
    if loss_type == "sigmoid":
        loss_B = (-(1.0 - label_smoothing) * torch.nn.functional.logsigmoid(beta * margin_B)
                  - label_smoothing * torch.nn.functional.logsigmoid(-beta * margin_B))
    elif loss_type == "ipo":
        loss_B = (margin_B - 1.0 / (2.0 * beta)).square()
    else:
        raise ValueError(f"unknown dpo_loss_type {loss_type!r}")
    return loss_B, beta * chosen_ratio_B.detach(), beta * rejected_ratio_B.detach()
