"""Advantage estimators and reward shaping: small pure torch functions.

Shape suffixes: ``_B`` one value per row/rollout, ``_BT`` one per token position.

Example:
    >>> import torch
    >>> r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    >>> g = torch.tensor([0, 0, 1, 1])
    >>> [round(a, 4) for a in group_advantages_B(r, g).tolist()]  # mean 0.5, std 0.7071
    [0.7071, -0.7071, 0.0, 0.0]
"""

from __future__ import annotations

import torch


def group_advantages_B(
    rewards_B: torch.Tensor,
    group_B: torch.Tensor,
    *,
    norm_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GRPO advantages: ``(r - mean_g) / (std_g + eps)`` within each group (same prompt).

    ``std`` is the unbiased sample std (as in verl). A group of one has no baseline to compare
    against, so its advantage is 0. ``norm_by_std=False`` gives ``r - mean_g`` (Dr. GRPO).
    """
    adv_B = torch.zeros_like(rewards_B, dtype=torch.float32)
    for g in torch.unique(group_B):
        idx = group_B == g
        r = rewards_B[idx].float()
        if r.numel() < 2:
            continue
        centred = r - r.mean()
        adv_B[idx] = centred / (r.std() + eps) if norm_by_std else centred
    return adv_B


def overlong_penalty_B(
    response_len_B: torch.Tensor, *, max_response_len: int, buffer_len: int, factor: float = 1.0
) -> torch.Tensor:
    """DAPO soft overlong punishment, added to the reward.

    0 up to ``max_response_len - buffer_len`` tokens, then falls linearly to ``-factor`` at
    ``max_response_len``; ``-factor`` beyond. ``buffer_len = 0`` disables it.
    """
    if buffer_len <= 0 or factor == 0:
        return torch.zeros_like(response_len_B, dtype=torch.float32)
    expected = max_response_len - buffer_len
    excess = response_len_B.float() - expected
    penalty = -(excess / buffer_len).clamp(min=0.0, max=1.0) * factor
    return penalty


def opd_advantages_BT(
    logp_BT: torch.Tensor, teacher_logp_BT: torch.Tensor, mask_BT: torch.Tensor
) -> torch.Tensor:
    """On-policy distillation: per-token advantage ``-(log pi - log pi_teacher)`` (reverse KL).

    Tokens the teacher finds likelier than the student get a positive advantage.
    """
    return -(logp_BT.detach() - teacher_logp_BT) * mask_BT


def rollout_weights_B(rollout_index_B: torch.Tensor) -> torch.Tensor:
    """Weight ``1 / rows_in_its_rollout`` per row, so every rollout counts once in seq-mean
    losses however many rows (context breaks) it produced."""
    _, inverse, counts = torch.unique(rollout_index_B, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse].float()

