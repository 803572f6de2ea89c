"""Advantage estimators against hand-computed values."""

import pytest
import torch

from rltune.trainer.signals.advantages import (
    group_advantages_B,
    opd_advantages_BT,
    overlong_penalty_B,
    rollout_weights_B,
)


def test_group_normalised_advantages():
    # One group [1,0,0,0]: mean 0.25, unbiased std sqrt(0.75/3) = 0.5.
    adv = group_advantages_B(torch.tensor([1.0, 0, 0, 0]), torch.tensor([0, 0, 0, 0]))
    assert adv.tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], abs=1e-5)
    # Two groups: [2,4] → mean 3, std sqrt(2); [5] alone → 0 (no baseline).
    adv = group_advantages_B(torch.tensor([2.0, 4.0, 5.0]), torch.tensor([7, 7, 9]))
    assert adv.tolist() == pytest.approx([-0.707107, 0.707107, 0.0], abs=1e-5)
    # Equal rewards → 0, never NaN.
    assert group_advantages_B(torch.tensor([1.0, 1.0]), torch.tensor([0, 0])).tolist() == [0, 0]
    # Dr. GRPO style: centred only.
    adv = group_advantages_B(torch.tensor([2.0, 4.0]), torch.tensor([0, 0]), norm_by_std=False)
    assert adv.tolist() == [-1.0, 1.0]


def test_overlong_penalty():
    # max 10, buffer 4 → no penalty up to 6 tokens, linear to -1 at 10, -1 beyond.
    pen = overlong_penalty_B(torch.tensor([5, 6, 8, 10, 12]), max_response_len=10,
                             buffer_len=4, factor=1.0)
    assert pen.tolist() == pytest.approx([0, 0, -0.5, -1.0, -1.0])
    assert overlong_penalty_B(torch.tensor([12]), max_response_len=10, buffer_len=4,
                              factor=0.5).tolist() == [-0.5]
    assert overlong_penalty_B(torch.tensor([12]), max_response_len=10,
                              buffer_len=0).tolist() == [0.0]


def test_opd_reverse_kl_advantage():
    adv = opd_advantages_BT(torch.tensor([[-1.0, -2.0, -3.0]]), torch.tensor([[-0.5, -3.0, 0.0]]),
                            torch.tensor([[1.0, 1.0, 0.0]]))
    assert adv.tolist() == [[0.5, -1.0, 0.0]]


def test_rollout_weights():
    assert rollout_weights_B(torch.tensor([0, 0, 1, 2, 2, 2])).tolist() == pytest.approx(
        [0.5, 0.5, 1.0, 1 / 3, 1 / 3, 1 / 3])
