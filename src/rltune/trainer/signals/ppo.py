"""PPO's learning signal (``advantage_estimator: gae``, ``algorithm: ppo``).

Each step: the rollouts are scored by the reward functions (DAPO's overlong penalty applies
when set); the critic (``trainer/signals/critic.py``) values every token; each rollout's score
is its reward on its last policy token; GAE (``trainer/signals/gae.py``) turns values and rewards
into per-token advantages and returns over the policy's own tokens only (tool results and
observations of a multi-turn rollout have loss mask 0 and are skipped); the advantages are
whitened over the step; the critic is fitted to the returns; the policy rows are returned with
their advantages. A rollout split into several rows (context breaks) is one episode: its rows'
policy tokens are chained in order before GAE.

For the first ``critic_warmup_steps`` steps only the critic trains: no policy rows are returned,
so the policy (and the engine's weights) stay as they are.

Example:
    >>> from rltune.config import HyperParameters, resolve_algorithm
    >>> hp = HyperParameters(algorithm="ppo", n_rollouts=1)
    >>> resolve_algorithm(hp).advantage_estimator
    'gae'
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Optional

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.rollout.results import RolloutResult
from rltune.trainer.logprobs import pad_rows
from rltune.trainer.protocols import Updater
from rltune.trainer.rows import (
    SignalRows,
    rollout_notes,
    shape_rewards,
    training_rows,
    with_advantage,
)
from rltune.trainer.signals.critic import Critic, ValueModel
from rltune.trainer.signals.gae import gae_advantages_BT, terminal_rewards_BT, whiten_BT
from rltune.trainer.update import TrainingRow, mini_batches


class CriticSignal:
    """GAE advantages from a learned critic (PPO)."""

    scores_rollouts = True
    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {
        "value_loss": ("critic/vf_loss", "vf loss")}

    def __init__(self, hp: HyperParameters, knobs: AlgorithmKnobs, critic: Critic):
        self.hp, self.knobs, self.critic = hp, knobs, critic
        #: why a step returned no policy rows (the step logs it instead of a warning)
        self.no_rows_reason: Optional[str] = None

    @classmethod
    def from_job(cls, hp: HyperParameters, knobs: AlgorithmKnobs, *,
                 updater: Optional[Updater], **_: Any) -> CriticSignal:
        model = updater.model if updater is not None else None
        if updater is None or model is None:
            raise ValueError("PPO's critic is initialised from the policy, and this updater "
                             "holds none")
        return cls(hp, knobs, Critic(ValueModel.from_policy(model), hp, knobs,
                                     pad_token_id=updater.pad_token_id))

    def trains(self, r: RolloutResult) -> bool:
        return r.usable

    async def rows(self, results: list[RolloutResult]) -> SignalRows:
        self.no_rows_reason = None
        scored = [r for r in results if r.usable]
        if not scored:
            return SignalRows([])
        rewards = {r.rollout_id: v for r, v in zip(
            scored, shape_rewards(scored, self.hp, self.knobs), strict=True)}
        rows = training_rows(scored, self.hp.max_length)
        if rows:
            rows, metrics = await asyncio.to_thread(self._fit, rows, rewards)
        else:
            metrics = {}
        return SignalRows(rows, metrics, rollout_notes(scored, rows, rewards))

    def _fit(self, rows: list[TrainingRow], rewards: dict[str, float]
             ) -> tuple[list[TrainingRow], dict[str, float]]:
        """Values, GAE, the critic's update; the policy rows (with their advantages) unless
        the critic warms up. ``rewards``: each rollout's shaped reward, by rollout id."""
        ids = [row.input_ids for row in rows]
        masks = [row.loss_mask for row in rows]
        values = self.critic.values(ids)
        advantages, returns = episode_gae(
            values, masks, [rewards[row.rollout_id] for row in rows],
            [row.rollout_id for row in rows], gamma=self.knobs.gamma, lam=self.knobs.lam)
        metrics = self.critic.update(ids, masks, returns, values,
                                     mini_batches(rows, self.hp.mini_batch_rollouts))
        warmup = self.knobs.critic_warmup_steps
        metrics["critic/warmup"] = float(self.critic.steps <= warmup)
        if self.critic.steps <= warmup:
            self.no_rows_reason = (f"critic warm-up {self.critic.steps}/{warmup}: only the "
                                   "critic trains, the policy is frozen")
            return [], metrics
        return [with_advantage(row, adv) for row, adv in zip(rows, advantages, strict=True)], \
            metrics

    async def validation(self, results: list[RolloutResult]) -> dict[str, float]:
        return {}

    # ---- state for checkpoints (``critic.pt``) ----
    def state_dict(self) -> dict[str, Any]:
        return self.critic.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.critic.load_state_dict(state)


def episode_gae(values: list[list[float]], masks: list[list[int]], rewards: list[float],
                rollout_ids: list[str], *, gamma: float, lam: float
                ) -> tuple[list[list[float]], list[list[float]]]:
    """Per-row advantages (whitened over all policy tokens) and returns, with the rows of one
    rollout chained into one episode (in order) whose reward sits on its last policy token."""
    episodes: dict[str, list[int]] = {}
    for i, rid in enumerate(rollout_ids):
        episodes.setdefault(rid, []).append(i)
    order = list(episodes.values())
    values_BT = pad_rows([[v for i in rows for v in values[i]] for rows in order],
                         dtype=torch.float32)[0]
    mask_BT = pad_rows([[m for i in rows for m in masks[i]] for rows in order],
                       dtype=torch.float32)[0]
    rewards_BT = terminal_rewards_BT(torch.tensor([rewards[rows[0]] for rows in order]), mask_BT)
    adv_BT, ret_BT = gae_advantages_BT(values_BT, rewards_BT, mask_BT, gamma, lam)
    adv_BT = whiten_BT(adv_BT, mask_BT)
    advantages: list[list[float]] = [[] for _ in rollout_ids]
    returns: list[list[float]] = [[] for _ in rollout_ids]
    for b, rows in enumerate(order):
        start = 0
        for i in rows:
            n = len(values[i])
            advantages[i] = adv_BT[b, start:start + n].tolist()
            returns[i] = ret_BT[b, start:start + n].tolist()
            start += n
    return advantages, returns
