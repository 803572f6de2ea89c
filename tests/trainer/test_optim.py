"""Learning-rate schedule values by hand."""

import pytest

from rltune.config import HyperParameters
from rltune.trainer.optim import build_optimizer, build_scheduler, lr_factor
from rltune.trainer.testing import tiny_qwen2


def test_lr_factor_shapes():
    f = lambda s, kind, **kw: lr_factor(s, total_steps=10, warmup_steps=2, kind=kind, **kw)  # noqa: E731
    assert [f(s, "linear") for s in (0, 1, 2)] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert f(6, "linear") == pytest.approx(0.5)  # halfway through the 8 decay steps
    assert f(6, "cosine") == pytest.approx(0.5)
    assert f(10, "cosine", min_ratio=0.1) == pytest.approx(0.1)
    assert f(9, "constant") == 1.0


def test_scheduler_with_auto_warmup():
    model = tiny_qwen2()
    hp = HyperParameters(learning_rate=0.1, lr_scheduler_type="linear", lr_warmup_steps=-1)
    opt = build_optimizer(model, hp)
    sched = build_scheduler(opt, hp, total_steps=100)  # auto warmup = ceil(3) = 3 steps
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.025, 0.05, 0.075, 0.1])
    # Norm weights and biases are not decayed.
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]


def test_min_lr_ratio_is_the_cosine_floor_of_the_scheduler():
    opt = build_optimizer(tiny_qwen2(), hp := HyperParameters(
        learning_rate=0.1, lr_scheduler_type="cosine", lr_warmup_steps=0, min_lr_ratio=0.1))
    sched = build_scheduler(opt, hp, total_steps=10)
    for _ in range(10):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
