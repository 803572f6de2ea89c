"""Generalised advantage estimation (GAE) for PPO with a critic: small pure torch functions.

Token positions are aligned with ``input_ids`` as in ``trainer/losses.py``: ``values_BT[b, t]``
is the critic's value of the state *before* token ``t`` is sampled, ``mask_BT[b, t]`` is 1 where
token ``t`` was sampled by the policy, and ``rewards_BT[b, t]`` is the reward for that token (the
rollout's score sits on its last policy token).

A multi-turn agentic row interleaves the policy's tokens with tool results and observations
(mask 0). Those tokens are not actions of the policy, so GAE skips them: the recursion runs over
the policy's tokens only, each one bootstrapping from the value at the *next policy token*
(tool tokens in between neither discount nor add reward), and their advantage is 0.

Example (one row: a prompt token, two policy tokens, a tool token, a policy token; the reward 1
on the last one; gamma = lam = 1, so each advantage is the return 1 minus the value):
    >>> import torch
    >>> v = torch.tensor([[0.0, 0.5, 0.25, 9.0, 0.75]])
    >>> m = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0]])
    >>> r = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]])
    >>> adv, ret = gae_advantages_BT(v, r, m, gamma=1.0, lam=1.0)
    >>> adv.tolist(), ret.tolist()
    ([[0.0, 0.5, 0.75, 0.0, 0.25]], [[0.0, 1.0, 1.0, 0.0, 1.0]])
"""

from __future__ import annotations

import torch

from rltune.trainer.losses import masked_mean


def gae_advantages_BT(
    values_BT: torch.Tensor,
    rewards_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and returns (the critic's targets) per token; 0 where ``mask_BT`` is 0.

    Over the policy's tokens ``t_1 < ... < t_n`` of a row (mask 1):
    ``delta_i = r_i + gamma * V(t_{i+1}) - V(t_i)`` (``V(t_{n+1}) = 0``: the episode ends),
    ``A_i = delta_i + gamma * lam * A_{i+1}``, ``R_i = A_i + V(t_i)``. Rewards and values at
    masked-out positions are never read.
    """
    values_BT = values_BT.detach().float()
    rewards_BT = rewards_BT.float()
    mask_BT = mask_BT.float()
    batch, width = values_BT.shape
    adv_BT = torch.zeros_like(values_BT)
    next_value_B = torch.zeros(batch, dtype=values_BT.dtype, device=values_BT.device)
    next_adv_B = torch.zeros_like(next_value_B)
    for t in reversed(range(width)):
        m_B = mask_BT[:, t]
        delta_B = rewards_BT[:, t] + gamma * next_value_B - values_BT[:, t]
        adv_B = delta_B + gamma * lam * next_adv_B
        # a masked-out token carries the running values through unchanged
        next_adv_B = torch.where(m_B > 0, adv_B, next_adv_B)
        next_value_B = torch.where(m_B > 0, values_BT[:, t], next_value_B)
        adv_BT[:, t] = torch.where(m_B > 0, adv_B, torch.zeros_like(adv_B))
    returns_BT = (adv_BT + values_BT) * mask_BT
    return adv_BT, returns_BT


def terminal_rewards_BT(scores_B: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """Each row's score on its last policy token (mask 1), 0 elsewhere (a row without any
    policy token gets none)."""
    width = mask_BT.shape[1]
    positions_BT = torch.arange(width, device=mask_BT.device).expand_as(mask_BT)
    last_B = torch.where(mask_BT > 0, positions_BT, torch.full_like(positions_BT, -1)).amax(-1)
    rewards_BT = torch.zeros_like(mask_BT, dtype=torch.float32)
    has_B = last_B >= 0
    rows_B = torch.arange(mask_BT.shape[0], device=mask_BT.device)
    rewards_BT[rows_B[has_B], last_B[has_B]] = scores_B.float()[has_B]
    return rewards_BT


def whiten_BT(x_BT: torch.Tensor, mask_BT: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / std`` over the masked positions of the whole batch (0 elsewhere), as
    verl does with GAE advantages; one position alone keeps only its centring."""
    mean = masked_mean(x_BT, mask_BT)
    centred_BT = (x_BT - mean) * mask_BT
    n = float(mask_BT.sum())
    if n < 2:
        return centred_BT
    var = centred_BT.square().sum() / (n - 1)
    return centred_BT / (var.sqrt() + eps)


def explained_variance(values_N: torch.Tensor, returns_N: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)``: 1 = the critic predicts the returns, 0 = no
    better than their mean, < 0 = worse (NaN when the returns do not vary)."""
    var = float(returns_N.float().var(unbiased=False)) if returns_N.numel() else 0.0
    if var <= 0:
        return float("nan")
    return 1.0 - float((returns_N.float() - values_N.float()).var(unbiased=False)) / var
