"""The learning signal of a step, chosen by the configured ``advantage_estimator``.

``SIGNALS`` maps each estimator to the class that turns a step's rollouts into training rows
with one advantage per token. Everything that differs between reward-driven RL and on-policy
distillation lives here, behind one small interface:

* ``grpo`` (GRPO, GSPO, DAPO): rollouts are scored by the reward functions; a rollout trains
  when it is ``usable``; the score is shaped (DAPO's overlong penalty) into ``reward`` and the
  advantage ``(r - mean_g) / std_g`` within the prompt's group is spread over its tokens.
* ``gae`` (PPO): per-token GAE advantages from a learned critic (``trainer/signals/ppo.py``).
* ``opd`` (``training.type: pg_opd``): every rollout that ran trains; each sampled token gets
  ``-(log pi - log pi_teacher)``. Reward functions are optional; with them each token also
  gets ``opd_reward_weight`` x its rollout's group advantage (``trainer/signals/opd_reward.py``).

Example:
    >>> from rltune.config import HyperParameters, resolve_algorithm
    >>> hp = HyperParameters(algorithm="grpo")
    >>> sig = build_signal(hp, resolve_algorithm(hp), updater=None, teacher=None,
    ...                    has_rewards=True)
    >>> type(sig).__name__, sig.scores_rollouts
    ('GroupSignal', True)
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any, ClassVar, Optional, Protocol

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.names import ADVANTAGE_ESTIMATORS, check_registry
from rltune.rollout.results import RolloutResult, by_prompt, has_signal
from rltune.trainer.protocols import Signal, Stateful, Updater
from rltune.trainer.rows import (
    SignalRows,
    rollout_notes,
    shape_rewards,
    training_rows,
    with_advantage,
)
from rltune.trainer.signals import opd_reward
from rltune.trainer.signals.advantages import group_advantages_B, opd_advantages_BT
from rltune.trainer.signals.ppo import CriticSignal
from rltune.trainer.signals.teacher import Teacher
from rltune.trainer.update import TrainingRow


class GroupSignal:
    """GRPO-style group advantages from the rollouts' (shaped) rewards."""

    scores_rollouts = True
    #: progress-state key -> (metric, label) shown with the step's progress
    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {}
    no_rows_reason: Optional[str] = None
    critic: Optional[Stateful] = None

    def __init__(self, hp: HyperParameters, knobs: AlgorithmKnobs):
        self.hp, self.knobs = hp, knobs

    @classmethod
    def from_job(cls, hp: HyperParameters, knobs: AlgorithmKnobs, **_: Any) -> GroupSignal:
        return cls(hp, knobs)

    def trains(self, r: RolloutResult) -> bool:
        return r.usable

    async def rows(self, results: list[RolloutResult]) -> SignalRows:
        """Shape rewards, compute group advantages, and return the rows to train on."""
        hp, knobs = self.hp, self.knobs
        scored = [r for r in results if r.usable]
        if not scored:
            return SignalRows([])
        rewards = shape_rewards(scored, hp, knobs)
        reward_of = {r.rollout_id: v for r, v in zip(scored, rewards, strict=True)}
        adv_B = group_advantages_B(torch.tensor(rewards),
                                   torch.tensor([r.sample_index for r in scored]),
                                   norm_by_std=knobs.norm_adv_by_std)
        if not any(has_signal(g, reward_of) for g in by_prompt(scored)):
            # no group carries a signal: an update would only replay momentum
            return SignalRows([], notes=rollout_notes(scored, [], reward_of))
        adv_of = {r.rollout_id: a for r, a in zip(scored, adv_B.tolist(), strict=True)}
        # Zero-advantage rollouts stay in: they add no policy gradient but count in the loss's
        # normaliser. Dropping them made the gradient scale with the share of flat groups, so
        # a step with little signal weighed as much as a rich one.
        rows = [with_advantage(row, [adv_of[row.rollout_id]] * len(row.input_ids))
                for row in training_rows(scored, hp.max_length)]
        return SignalRows(rows, notes=rollout_notes(scored, rows, reward_of))

    async def validation(self, results: list[RolloutResult]) -> dict[str, float]:
        return {}


class TeacherSignal:
    """On-policy distillation: per-token advantages from the teacher's log-probs."""

    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {
        "teacher_kl": ("actor/teacher_kl", "teacher KL")}
    no_rows_reason: Optional[str] = None
    critic: Optional[Stateful] = None

    def __init__(self, hp: HyperParameters, updater: Updater, teacher: Teacher,
                 has_rewards: bool, norm_by_std: bool = True):
        self.hp, self.updater, self.teacher = hp, updater, teacher
        self.scores_rollouts = has_rewards  # OPD may have no reward function at all
        # teacher + reward: both train (0 keeps the rewards as metrics only)
        weight = hp.opd_reward_weight
        self.reward_weight = (opd_reward.DEFAULT_WEIGHT if weight is None else weight) \
            if has_rewards else 0.0
        self.norm_by_std = norm_by_std

    @classmethod
    def from_job(cls, hp: HyperParameters, knobs: AlgorithmKnobs, *,
                 updater: Optional[Updater], teacher: Optional[Teacher], has_rewards: bool,
                 **_: Any) -> TeacherSignal:
        if updater is None or teacher is None:
            raise ValueError("on-policy distillation needs the policy's updater and the "
                             "teacher model (training.type pg_opd loads it)")
        return cls(hp, updater, teacher, has_rewards, knobs.norm_adv_by_std)

    def trains(self, r: RolloutResult) -> bool:
        # a failed reward does not stop distillation; a discarded group (Ark's DISCARD) does
        return r.ok and not r.discarded

    async def rows(self, results: list[RolloutResult]) -> SignalRows:
        reward_adv = opd_reward.reward_advantages(
            results, weight=self.reward_weight, norm_by_std=self.norm_by_std)
        rows, kl = await asyncio.to_thread(
            self._distil, [r for r in results if self.trains(r)], reward_adv)
        metrics = {"train/dropped_rollouts": float(sum(not self.trains(r) for r in results))}
        if math.isfinite(kl):
            metrics["actor/teacher_kl"] = kl
        rewards = {r.rollout_id: r.score for r in results if r.score is not None}
        return SignalRows(rows, metrics, rollout_notes(results, rows, rewards))

    async def validation(self, results: list[RolloutResult]) -> dict[str, float]:
        _, kl = await asyncio.to_thread(self._distil, [r for r in results if r.ok])
        return {"validation/teacher_kl": kl} if math.isfinite(kl) else {}

    def _distil(self, results: list[RolloutResult], reward_adv: Optional[dict[str, float]] = None
                ) -> tuple[list[TrainingRow], float]:
        """Rows whose per-token advantage is ``-(log pi_old - log pi_teacher)`` on the sampled
        tokens (plus ``reward_adv[rollout_id]`` on each), and the mean of ``log pi_old - log
        pi_teacher`` over those tokens (a sample estimate of the reverse KL to the teacher,
        before the update)."""
        reward_adv = reward_adv or {}
        rows = training_rows(results, self.hp.max_length)
        if not rows:
            return rows, float("nan")
        # The student's old log-probs are computed here (the updater then reuses them).
        student = self.updater.compute_logprobs(rows)
        teacher = self.teacher.logprobs([row.input_ids for row in rows])
        kl_sum = tokens = 0.0
        out: list[TrainingRow] = []
        for row, old, ref in zip(rows, student, teacher, strict=True):
            mask = torch.tensor(row.loss_mask, dtype=torch.float32)
            adv = opd_advantages_BT(torch.tensor(old), torch.tensor(ref), mask)
            kl_sum -= float(adv.sum())
            tokens += float(mask.sum())
            adv = adv + reward_adv.get(row.rollout_id, 0.0) * mask
            out.append(dataclasses.replace(row, advantage=adv.tolist(), old_logprobs=old))
        return out, kl_sum / tokens


class SignalClass(Protocol):
    """What ``SIGNALS`` holds: a signal class, built for a job by ``from_job``."""

    def from_job(self, hp: HyperParameters, knobs: AlgorithmKnobs, *,
                 updater: Optional[Updater], teacher: Optional[Teacher],
                 has_rewards: bool) -> Signal: ...


#: advantage estimator -> the signal class that implements it
SIGNALS: dict[str, SignalClass] = {"grpo": GroupSignal, "opd": TeacherSignal,
                                   "gae": CriticSignal}
check_registry("advantage estimator", ADVANTAGE_ESTIMATORS, SIGNALS)


def build_signal(hp: HyperParameters, knobs: AlgorithmKnobs, *, updater: Optional[Updater],
                 teacher: Optional[Teacher], has_rewards: bool) -> Signal:
    """The signal of ``knobs.advantage_estimator`` for this job."""
    return SIGNALS[knobs.advantage_estimator].from_job(
        hp, knobs, updater=updater, teacher=teacher, has_rewards=has_rewards)
