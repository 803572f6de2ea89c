"""The learning signal of a step, chosen by the configured ``advantage_estimator``.

``SIGNALS`` maps each estimator to the class that turns a step's rollouts into training rows
with one advantage per token. Everything that differs between reward-driven RL and on-policy
distillation lives here, behind one small interface:

* ``grpo`` (GRPO, GSPO, DAPO): rollouts are scored by the reward functions; a rollout trains
  when it is ``usable``; the score is shaped (DAPO's overlong penalty) into ``reward`` and the
  advantage ``(r - mean_g) / std_g`` within the prompt's group is spread over its tokens.
* ``gae`` (PPO): per-token GAE advantages from a learned critic (``trainer/ppo.py``).
* ``opd`` (``training.type: pg_opd``): every rollout that ran trains; each sampled token gets
  ``-(log pi - log pi_teacher)``. Reward functions are optional; with them each token also
  gets ``opd_reward_weight`` x its rollout's group advantage (``trainer/opd_reward.py``).

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
import math
from typing import Any, ClassVar, Optional

import torch

from rltune.names import ADVANTAGE_ESTIMATORS, check_registry
from rltune.rollout.results import RolloutResult, by_prompt, has_signal
from rltune.trainer import opd_reward
from rltune.trainer.advantages import group_advantages_B, opd_advantages_BT, overlong_penalty_B
from rltune.trainer.ppo import CriticSignal
from rltune.trainer.protocols import Signal, Updater
from rltune.trainer.update import TrainingRow


def training_rows(results: list[RolloutResult], max_length: int) -> list[TrainingRow]:
    """One row per context of each given rollout, cut at ``max_length``, advantage 0.

    ``row.meta["result"]`` and ``row.meta["row"]`` point back to the rollout and its row.
    """
    rows: list[TrainingRow] = []
    for r in results:
        r.advantages = [[0.0] * len(row.input_ids) for row in r.sequences]
        for i, row in enumerate(r.sequences):
            mask = row.loss_mask[:max_length]
            if sum(mask) == 0:
                continue
            rows.append(TrainingRow(
                input_ids=row.input_ids[:max_length],
                loss_mask=mask,
                advantage=0.0,
                rollout_id=r.rollout_id,
                rollout_logprobs=row.sampled_logprobs[:max_length],
                meta={"result": r, "row": i},
            ))
    return rows


def shape_rewards(scored: list[RolloutResult], hp: Any, knobs: Any) -> torch.Tensor:
    """Each scored rollout's reward: its score plus DAPO's overlong penalty when that is on;
    also written to ``r.reward``."""
    rewards_B = torch.tensor([float(r.score) for r in scored])  # type: ignore[arg-type]
    if knobs.overlong_buffer_len > 0 and knobs.overlong_penalty_factor > 0:
        rewards_B = rewards_B + overlong_penalty_B(
            torch.tensor([float(r.response_tokens) for r in scored]),
            max_response_len=hp.max_length - hp.max_prompt_length,
            buffer_len=knobs.overlong_buffer_len,
            factor=knobs.overlong_penalty_factor,
        )
    for r, value in zip(scored, rewards_B.tolist(), strict=True):
        r.reward = value
    return rewards_B


def set_advantages(row: TrainingRow, values: list[float]) -> None:
    """Give ``row`` its per-token advantages and copy them onto its rollout's record."""
    row.advantage = values
    r: RolloutResult = row.meta["result"]
    r.advantages[row.meta["row"]][: len(values)] = values


class GroupSignal:
    """GRPO-style group advantages from the rollouts' (shaped) rewards."""

    scores_rollouts = True
    #: progress-state key -> (metric, label) shown with the step's progress
    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {}

    def __init__(self, hp: Any, knobs: Any):
        self.hp, self.knobs = hp, knobs

    @classmethod
    def from_job(cls, hp: Any, knobs: Any, **_: Any) -> GroupSignal:
        return cls(hp, knobs)

    def trains(self, r: RolloutResult) -> bool:
        return r.usable

    async def rows(self, results: list[RolloutResult]) -> tuple[list[TrainingRow], dict]:
        """Shape rewards, compute group advantages, and return the rows to train on."""
        hp, knobs = self.hp, self.knobs
        scored = [r for r in results if r.usable]
        if not scored:
            return [], {}
        rewards_B = shape_rewards(scored, hp, knobs)
        adv_B = group_advantages_B(rewards_B, torch.tensor([r.sample_index for r in scored]),
                                   norm_by_std=knobs.norm_adv_by_std)
        if not any(has_signal(g) for g in by_prompt(scored)):
            return [], {}  # no group carries a signal: an update would only replay momentum
        rows = training_rows(scored, hp.max_length)
        adv_of = {r.rollout_id: a for r, a in zip(scored, adv_B.tolist(), strict=True)}
        # Zero-advantage rollouts stay in: they add no policy gradient but count in the loss's
        # normaliser. Dropping them made the gradient scale with the share of flat groups, so
        # a step with little signal weighed as much as a rich one.
        for row in rows:
            set_advantages(row, [adv_of[row.rollout_id]] * len(row.input_ids))
        return rows, {}

    async def validation(self, results: list[RolloutResult]) -> dict[str, float]:
        return {}


class TeacherSignal:
    """On-policy distillation: per-token advantages from the teacher's log-probs."""

    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {
        "teacher_kl": ("actor/teacher_kl", "teacher KL")}

    def __init__(self, hp: Any, updater: Updater, teacher: Any, has_rewards: bool,
                 norm_by_std: bool = True):
        self.hp, self.updater, self.teacher = hp, updater, teacher
        self.scores_rollouts = has_rewards  # OPD may have no reward function at all
        # teacher + reward: both train (0 keeps the rewards as metrics only)
        weight = hp.opd_reward_weight
        self.reward_weight = (opd_reward.DEFAULT_WEIGHT if weight is None else weight) \
            if has_rewards else 0.0
        self.norm_by_std = norm_by_std

    @classmethod
    def from_job(cls, hp: Any, knobs: Any, *, updater: Updater, teacher: Any,
                 has_rewards: bool) -> TeacherSignal:
        return cls(hp, updater, teacher, has_rewards, knobs.norm_adv_by_std)

    def trains(self, r: RolloutResult) -> bool:
        # a failed reward does not stop distillation; a discarded group (Ark's DISCARD) does
        return r.ok and not r.discarded

    async def rows(self, results: list[RolloutResult]) -> tuple[list[TrainingRow], dict]:
        for r in results:
            r.reward = r.score
        reward_adv = opd_reward.reward_advantages(
            results, weight=self.reward_weight, norm_by_std=self.norm_by_std)
        rows, kl = await asyncio.to_thread(
            self._distil, [r for r in results if self.trains(r)], reward_adv)
        metrics = {"train/dropped_rollouts": float(sum(not self.trains(r) for r in results))}
        if math.isfinite(kl):
            metrics["actor/teacher_kl"] = kl
        return rows, metrics

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
        for row, old, ref in zip(rows, student, teacher, strict=True):
            mask = torch.tensor(row.loss_mask, dtype=torch.float32)
            adv = opd_advantages_BT(torch.tensor(old), torch.tensor(ref), mask)
            kl_sum -= float(adv.sum())
            tokens += float(mask.sum())
            adv = adv + reward_adv.get(row.rollout_id, 0.0) * mask
            row.old_logprobs = old
            set_advantages(row, adv.tolist())
        return rows, kl_sum / tokens


#: advantage estimator -> the signal class that implements it
SIGNALS: dict[str, type] = {"grpo": GroupSignal, "opd": TeacherSignal, "gae": CriticSignal}
check_registry("advantage estimator", ADVANTAGE_ESTIMATORS, SIGNALS)


def build_signal(hp: Any, knobs: Any, *, updater: Optional[Updater], teacher: Optional[Any],
                 has_rewards: bool) -> Signal:
    """The signal of ``knobs.advantage_estimator`` for this job."""
    return SIGNALS[knobs.advantage_estimator].from_job(
        hp, knobs, updater=updater, teacher=teacher, has_rewards=has_rewards)
