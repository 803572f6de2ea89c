"""PPO with a critic: GAE and the clipped value loss against hand-computed values, tool tokens
skipped by GAE, the critic's warm-up, update metrics and checkpoint round trip, and the keys
that only apply to PPO."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rltune.config import HyperParameters, resolve_algorithm
from rltune.sdk.errors import ConfigError
from rltune.trainer.losses import value_loss_BT
from rltune.trainer.signals.critic import Critic, ValueModel
from rltune.trainer.signals.gae import (
    explained_variance,
    gae_advantages_BT,
    terminal_rewards_BT,
    whiten_BT,
)
from rltune.trainer.signals.ppo import CriticSignal, episode_gae
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import TrainingRow

# Three policy tokens with values 0.2, 0.5, 0.4 and the reward 1 on the last; gamma 0.9, lam 0.8:
#   A3 = 1 - 0.4                                  = 0.6
#   A2 = (0.9 * 0.4 - 0.5) + 0.72 * 0.6           = 0.292
#   A1 = (0.9 * 0.5 - 0.2) + 0.72 * 0.292         = 0.46024
# and the returns A + V: 0.66024, 0.792, 1.0.
HAND_ADV = [0.46024, 0.292, 0.6]
HAND_RET = [0.66024, 0.792, 1.0]


def test_gae_matches_hand_computed_values():
    values = torch.tensor([[0.0, 0.2, 0.5, 0.4]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    adv, ret = gae_advantages_BT(values, rewards, mask, gamma=0.9, lam=0.8)
    assert adv[0, 1:].tolist() == pytest.approx(HAND_ADV)
    assert ret[0, 1:].tolist() == pytest.approx(HAND_RET)
    assert adv[0, 0] == 0 and ret[0, 0] == 0


def test_gae_skips_tool_and_observation_tokens():
    """A multi-turn row: tool tokens (mask 0) between the policy's tokens neither discount nor
    take values; the policy tokens get exactly the advantages of the row without them."""
    values = torch.tensor([[7.0, 0.2, 0.5, -3.0, 5.0, 0.4, 9.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]])
    rewards = terminal_rewards_BT(torch.tensor([1.0]), mask)
    assert rewards.tolist() == [[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]]
    adv, ret = gae_advantages_BT(values, rewards, mask, gamma=0.9, lam=0.8)
    assert adv[0, [1, 2, 5]].tolist() == pytest.approx(HAND_ADV)
    assert ret[0, [1, 2, 5]].tolist() == pytest.approx(HAND_RET)
    assert adv[0, [0, 3, 4, 6]].tolist() == [0.0] * 4


def test_gae_with_gamma_and_lam_1_is_the_return_minus_the_value():
    values = torch.tensor([[0.0, 0.3, 0.6], [0.0, 0.1, 0.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    rewards = terminal_rewards_BT(torch.tensor([2.0, -1.0]), mask)
    adv, _ = gae_advantages_BT(values, rewards, mask, gamma=1.0, lam=1.0)
    assert adv.flatten().tolist() == pytest.approx([0.0, 1.7, 1.4, 0.0, -1.1, 0.0])


def test_clipped_value_loss_matches_hand_computed_values():
    values = torch.tensor([[1.0, 0.0, 0.3]])
    old = torch.zeros(1, 3)
    returns = torch.tensor([[2.0, -1.0, 0.5]])
    # position 0 moved 1.0 from its old value: clipped to 0.5, (0.5 - 2)^2 / 2 = 1.125 beats
    # (1 - 2)^2 / 2 = 0.5; positions 1 and 2 stay inside the clip range
    loss, clipped = value_loss_BT(values, old, returns, clip=0.5)
    assert loss[0].tolist() == pytest.approx([1.125, 0.5, 0.02])
    assert clipped.tolist() == [[True, False, False]]
    plain, none = value_loss_BT(values, old, returns, clip=None)
    assert plain[0].tolist() == pytest.approx([0.5, 0.5, 0.02])
    assert not none.any()


def test_whiten_and_explained_variance():
    x = torch.tensor([[0.0, 1.0, 3.0, 100.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    # mean 2, sample std sqrt(2): (1 - 2) / 1.414, (3 - 2) / 1.414; masked positions 0
    assert whiten_BT(x, mask)[0].tolist() == pytest.approx([0.0, -0.70710678, 0.70710678, 0.0])
    returns = torch.tensor([1.0, 2.0, 3.0])
    assert explained_variance(returns, returns) == 1.0
    assert explained_variance(torch.full((3,), 2.0), returns) == pytest.approx(0.0)


def test_a_rollout_split_into_rows_is_one_episode():
    """Two rows (a context break) of one rollout chain into one GAE episode whose reward sits
    on the second row's last policy token; a second rollout stands alone."""
    values = [[0.0, 0.2, 0.5], [0.0, 0.0, 0.4], [0.0, 0.1]]
    masks = [[0, 1, 1], [0, 0, 1], [0, 1]]
    adv, ret = episode_gae(values, masks, [1.0, 1.0, 0.0], ["a", "a", "b"], gamma=0.9, lam=0.8)
    assert [ret[0][1], ret[0][2], ret[1][2]] == pytest.approx(HAND_RET)
    assert ret[2][1] == pytest.approx(0.0)
    assert ret[1][:2] == [0.0, 0.0]
    raw = torch.tensor([*HAND_ADV, -0.1])  # whitened together over the step's policy tokens
    want = ((raw - raw.mean()) / raw.std()).tolist()
    assert [adv[0][1], adv[0][2], adv[1][2], adv[2][1]] == pytest.approx(want, abs=1e-5)


def _ppo_hp(**extra):
    return HyperParameters(algorithm="ppo", learning_rate=1e-3, n_rollouts=2, critic_lr=1e-3,
                           **extra)


def _rows(n=4):
    """Four one-row rollouts and their rewards (by rollout id)."""
    rows = [TrainingRow([1, 3 + i % 2, 5, 6, 7], [0, 1, 1, 0, 1], 0.0, f"r{i}")
            for i in range(n)]
    return rows, {f"r{i}": float(i % 2) for i in range(n)}


def test_critic_warm_up_then_policy_rows_and_verl_metrics():
    hp = _ppo_hp(critic_warmup_steps=2)
    knobs = resolve_algorithm(hp)
    sig = CriticSignal.from_job(hp, knobs, updater=SimpleNamespace(model=tiny_qwen2(),
                                                                   pad_token_id=0))
    losses = []
    for step in (1, 2, 3):
        given, rewards = _rows()
        rows, metrics = sig._fit(given, rewards)
        losses.append(metrics["critic/vf_loss"])
        for key in ("critic/vf_loss", "critic/vpred_mean", "critic/vf_explained_var",
                    "critic/vf_clipfrac", "critic/grad_norm"):
            assert key in metrics, key
        if step <= 2:  # warm-up: only the critic trains
            assert rows == [] and metrics["critic/warmup"] == 1.0
            assert "warm-up" in sig.no_rows_reason
        else:
            assert len(rows) == 4 and metrics["critic/warmup"] == 0.0
            # advantages only on the policy's tokens; the tool token (index 3) gets none
            assert all(r.advantage[0] == 0 and r.advantage[3] == 0 for r in rows)
            assert any(r.advantage[4] != 0 for r in rows)
            assert all(r.advantage == [0.0] * 5 for r in given)  # rows are not written to
    assert losses[-1] < losses[0]  # the critic learns the rewards


def test_critic_state_is_saved_and_restored_with_the_checkpoint(tmp_path):
    from rltune.trainer.checkpoint import restore_training_state, save_checkpoint

    hp = _ppo_hp()
    knobs = resolve_algorithm(hp)
    model = tiny_qwen2()
    critic = Critic(ValueModel.from_policy(model), hp, knobs)
    rows, _ = _rows()
    ids, masks = [r.input_ids for r in rows], [r.loss_mask for r in rows]
    returns = [[float(i % 2)] * 5 for i in range(4)]
    critic.update(ids, masks, returns, critic.values(ids), [[0, 1, 2, 3]])
    trained = critic.values(ids)
    path = save_checkpoint(tmp_path, step=1, model=model, critic=critic,
                           trainer_state={"epoch": 0})
    assert (path / "critic.pt").is_file()
    fresh = Critic(ValueModel.from_policy(tiny_qwen2()), hp, knobs)
    assert fresh.values(ids) != trained
    restore_training_state(path, critic=fresh)
    assert fresh.values(ids) == trained and fresh.steps == 1
    assert fresh.optimizer.state_dict()["state"]  # Adam's moments came back too
    # the critic starts from the policy's weights, not a copy that shares them
    assert all(p.data_ptr() != q.data_ptr() for p, q in
               zip(critic.model.trunk.parameters(), model.model.parameters(), strict=True))


@pytest.mark.parametrize("key, value", [("gamma", 0.99), ("lam", 0.95), ("critic_lr", 1e-5),
                                        ("vf_clip", 0.2), ("critic_warmup_steps", 3)])
def test_ppo_keys_are_refused_by_name_for_other_algorithms(key, value):
    HyperParameters(algorithm="ppo", **{key: value})
    with pytest.raises(Exception) as err:
        HyperParameters(algorithm="gspo", **{key: value})
    assert key in str(err.value) and "algorithm ppo" in str(err.value)


def test_ppo_preset_and_knobs():
    knobs = resolve_algorithm(HyperParameters(algorithm="ppo", n_rollouts=1, gamma=0.99))
    assert (knobs.advantage_estimator, knobs.gamma, knobs.lam, knobs.vf_clip) == \
        ("gae", 0.99, 1.0, 0.5)
    assert knobs.use_kl_loss is False and knobs.critic_warmup_steps == 0


def test_a_ppo_job_names_the_misplaced_key_in_its_file(tmp_path):
    from rltune.config import load_job_config

    (tmp_path / "train.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    (tmp_path / "job.yaml").write_text(
        "model: nano\ndatasets: [{type: training, file_name: train.jsonl}]\n"
        "training: {hyper_parameters: {algorithm: grpo, lam: 0.9}}\n")
    with pytest.raises(ConfigError) as err:
        load_job_config(tmp_path / "job.yaml")
    assert "lam" in str(err.value) and "algorithm ppo" in str(err.value)
