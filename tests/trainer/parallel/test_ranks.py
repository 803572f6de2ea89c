"""Trainer ranks started by the job process (rltune.trainer.parallel.ranks): this test process
is rank 0, rank 1 is a real ``rank_worker`` process joined over gloo. Two ranks update like one
process, their state continues a one-process updater exactly, and a rank that dies fails the step
with an error naming it. The whole-job tests (``rltune train`` with ``n_gpus_training: 2``) are in
test_ranks_job.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from rltune.config import HyperParameters, resolve_algorithm
from rltune.sdk.errors import TrainingFailedError
from rltune.trainer.parallel.ranks import start_ranked_updater
from rltune.trainer.policy import load_policy
from rltune.trainer.update import PolicyUpdater

_spec = importlib.util.spec_from_file_location(
    "dp_update", Path(__file__).parents[1] / "fixtures" / "dp_update.py")
dp_update = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp_update)


def _hp() -> HyperParameters:
    hp, _ = dp_update.hyper()
    return hp.model_copy(update={"n_gpus_training": 2})


def _policy(model_dir: Path, hp: HyperParameters) -> torch.nn.Module:
    return load_policy(model_dir, hp, resolve_algorithm(hp), torch.device("cpu"),
                       lambda *a, **k: None)[0]


async def _ranked(model_dir: Path, tmp_path: Path, hp: HyperParameters, **kw):
    model = _policy(model_dir, hp)
    args = {"model_path": model_dir, **kw}
    return await start_ranked_updater(
        model, hp, resolve_algorithm(hp), world_size=2, device=torch.device("cpu"),
        total_steps=4, pad_token_id=0, log_dir=tmp_path / "ranks", **args)


async def test_two_ranks_update_like_one_process_and_their_state_continues_there(
        tmp_path, tiny_model_dir):
    hp = _hp()
    knobs = resolve_algorithm(hp)
    plain = PolicyUpdater(_policy(tiny_model_dir, hp), hp, knobs, total_steps=4)
    one = plain.update(dp_update.batch(1))
    ranked = await _ranked(tiny_model_dir, tmp_path, hp)
    try:
        two = await ranked.aupdate(dp_update.batch(1))
        weights = await ranked.afull_weights()
        state = ranked.state_dict()
    finally:
        await ranked.close()
    assert all(p.poll() is not None for p in ranked.transport.procs.values())  # rank 1 stopped
    for name, w in plain.model.state_dict().items():
        torch.testing.assert_close(weights[name], w, rtol=1e-5, atol=2e-5)
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy"):
        assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), key
    # The 2-rank state is a one-process updater's state: a one-process job resumes from it.
    assert state["step"] == 1 and set(state["optimizer"]["state"]) == set(
        plain.optimizer.state_dict()["state"])
    resumed = PolicyUpdater(_policy(tiny_model_dir, hp), hp, knobs, total_steps=4)
    resumed.model.load_state_dict(weights)
    resumed.load_state_dict(state)
    plain.update(dp_update.batch(2))
    resumed.update(dp_update.batch(2))
    for name, w in plain.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], w, rtol=1e-5, atol=2e-5)


async def test_two_ranks_with_the_kl_term_update_like_one_process(tmp_path, tiny_model_dir):
    """The KL term on ranks (seed 001's kl_loss_coef with n_gpus_training): every rank loads its
    own frozen reference (rank 1 in its rank_worker, rank 0 here) and the update equals the
    one-process update with its reference, the KL part included."""
    hp = _hp().model_copy(update={"kl_loss_coef": 0.5, "use_kl_loss": True})
    knobs = resolve_algorithm(hp)
    policy, reference = load_policy(tiny_model_dir, hp, knobs, torch.device("cpu"),
                                    lambda *a, **k: None)
    assert reference is not None
    plain = PolicyUpdater(policy, hp, knobs, total_steps=4, reference_model=reference)
    ones = [plain.update(dp_update.batch(k)) for k in (1, 2)]
    ranked = await _ranked(tiny_model_dir, tmp_path, hp, reference_model=load_policy(
        tiny_model_dir, hp, knobs, torch.device("cpu"), lambda *a, **k: None)[1])
    try:
        twos = [await ranked.aupdate(dp_update.batch(k)) for k in (1, 2)]
        weights = await ranked.afull_weights()
    finally:
        await ranked.close()
    assert ones[1]["actor/kl_loss"] > 1e-6  # the policy has moved off its reference
    for one, two in zip(ones, twos, strict=True):
        for key in ("actor/kl_loss", "actor/pg_loss", "actor/grad_norm"):
            assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key
    for name, w in plain.model.state_dict().items():
        torch.testing.assert_close(weights[name], w, rtol=1e-5, atol=2e-5)


async def test_a_rank_that_dies_fails_the_step_naming_the_rank(tmp_path, tiny_model_dir):
    hp = _hp()
    # Rank 1 loads its policy from a folder that is not a model: it exits after joining.
    ranked = await _ranked(tiny_model_dir, tmp_path, hp, model_path=tmp_path / "no-model")
    try:
        with pytest.raises(TrainingFailedError) as info:
            await ranked.aupdate(dp_update.batch(1))
    finally:
        await ranked.close()
    assert info.value.where == "trainer rank 1"
    assert "trainer rank 1 of 2 exited with code 1" in info.value.message
    assert "no-model" in info.value.message  # the tail of the rank's own log
    assert str(tmp_path / "ranks" / "rank-1.log") in info.value.hint
