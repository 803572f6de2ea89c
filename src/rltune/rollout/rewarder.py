"""Score the rollouts of one prompt with every reward and group-reward component.

Reward calls of a group run concurrently. A component that returns FAILED is retried (bounded)
and then the rollout is dropped from training and counted (``reward_error``); a wrong answer
is a SUCCESS with a low score, so it trains normally. A ``reward_metric_weight`` that names a
metric the reward did not return is a config mistake: it raises one ``ConfigError`` (the job
fails at its first scoring, ``rltune test-functions`` stops with it) instead of dropping
every rollout. A rollout or reward output that discards
(``error_code="discard"``, Volcano Ark's DISCARD) drops the whole group at once, unretried.
Scores combine as ``scoring`` says.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Optional

from rltune.observability.spans import record_reward, reward_span
from rltune.rollout.results import RolloutResult
from rltune.rollout.scoring import (
    MissingRewardMetric,
    combine_scores,
    component_score,
    own_score,
)
from rltune.sdk.data import (
    GroupRewardInput,
    GroupRewardOutput,
    RequestMetadata,
    RewardInput,
    RewardOutput,
    TaskStatus,
    is_discard,
)
from rltune.sdk.errors import ConfigError, InvalidReward


@dataclass
class RewardComponent:
    """A running reward function: its pool and how its score counts."""

    name: str
    pool: Any  # FunctionPool: ``await pool.call(input) -> output``
    group: bool = False
    weight: float = 1.0
    metric_weights: Optional[dict[str, float]] = None


class Rewarder:
    def __init__(self, components: list[RewardComponent], *, job_id: str, max_retries: int):
        self.components = components
        self.job_id = job_id
        self.max_retries = max_retries

    async def _call(self, pool: Any, payload: Any, headers: dict[str, str]) -> Any:
        out = None
        for _ in range(self.max_retries + 1):
            out = await pool.call(payload, headers=headers)
            if out.status is not TaskStatus.FAILED or is_discard(out):
                return out
        return out

    async def score_group(self, results: list[RolloutResult], ground_truth: Any,
                          trainer_state: Optional[dict[str, Any]] = None) -> None:
        """Fill ``score``, ``component_scores``/``metrics`` or ``reward_error`` in place.

        A rollout or reward that discards (``is_discard``) drops the whole group. Each reward
        input also carries ``completion_ids`` (the sampled token ids) and ``trainer_state``,
        the keywords TRL passes to plain reward functions (``rltune.sdk.plain``).
        """
        if _discard_group(results, next((r.error for r in results if r.discarded), None)):
            return
        valid = [r for r in results if r.ok]
        if not valid:
            return
        if not self.components:
            for r in valid:
                try:
                    r.score = own_score(r.agent_output)
                except InvalidReward as exc:
                    r.reward_error = str(exc)
                    continue
                if r.score is None:
                    r.reward_error = (
                        "no reward function is configured and the rollout set no "
                        "agent_output.reward_score"
                    )
            return
        started = time.perf_counter()
        await asyncio.gather(
            *(self._score_component(c, valid, ground_truth, trainer_state or {})
              for c in self.components)
        )
        for r in valid:
            r.reward_latency_s = time.perf_counter() - started
        if _discard_group(results, next((r.reward_error for r in valid if r.discarded), None)):
            return
        weights = {c.name: c.weight for c in self.components}
        for r in valid:
            if r.reward_error is not None:
                continue
            try:
                r.score = combine_scores(r.component_scores, weights)
            except InvalidReward as exc:
                r.reward_error = str(exc)

    def _meta(self, r: RolloutResult) -> RequestMetadata:
        return RequestMetadata(
            job_id=self.job_id,
            sample_id=r.sample_id,
            rollout_id=r.rollout_id,
            attempt_id=str(r.attempts - 1),
        )

    async def _score_component(
        self, comp: RewardComponent, valid: list[RolloutResult], ground_truth: Any,
        trainer_state: dict[str, Any],
    ) -> None:
        if comp.group:
            payload = GroupRewardInput(
                agent_outputs=[r.agent_output for r in valid],
                ground_truth=ground_truth,
                request_metadata=self._meta(valid[0]),
                completion_ids=[sampled_ids(r) for r in valid],
                trainer_state=trainer_state,
            )
            with reward_span(comp.name, None, None, group=True) as headers:
                out: GroupRewardOutput = await self._call(comp.pool, payload, headers)
            if is_discard(out):
                valid[0].discarded = True
                valid[0].reward_error = f"group reward {comp.name} discarded: {out.error}"
                return
            rewards = out.reward.rewards if out.status is TaskStatus.SUCCESS else []
            if out.status is TaskStatus.FAILED or len(rewards) != len(valid):
                why = (
                    out.error
                    if out.status is TaskStatus.FAILED
                    else (
                        f"returned {len(rewards)} rewards for {len(valid)} rollouts; return one "
                        "Reward per agent output, in order"
                    )
                )
                for r in valid:
                    r.reward_error = r.reward_error or f"group reward {comp.name}: {why}"
                    r.error_code = r.error_code or getattr(out, "error_code", None)
                return
            for r, reward in zip(valid, rewards, strict=True):
                self._record(r, comp, reward)
            return

        async def one(r: RolloutResult) -> None:
            payload = RewardInput(
                agent_output=r.agent_output,
                ground_truth=ground_truth,
                request_metadata=self._meta(r),
                completion_ids=sampled_ids(r),
                trainer_state=trainer_state,
            )
            with reward_span(comp.name, r.rollout_id, r.traceparent) as headers:
                out: RewardOutput = await self._call(comp.pool, payload, headers)
                record_reward(out)
            if is_discard(out):
                r.discarded = True
                r.reward_error = f"reward {comp.name} discarded: {out.error}"
                return
            if out.status is TaskStatus.FAILED:
                r.reward_error = r.reward_error or f"reward {comp.name}: {out.error}"
                r.error_code = r.error_code or getattr(out, "error_code", None)
                return
            self._record(r, comp, out.reward)

        await asyncio.gather(*(one(r) for r in valid))

    @staticmethod
    def _record(r: RolloutResult, comp: RewardComponent, reward: Any) -> None:
        try:
            r.component_scores[comp.name] = component_score(reward, comp.metric_weights)
        except MissingRewardMetric as exc:  # the same for every rollout: stop here, once
            raise ConfigError(
                f"reward {comp.name}: {exc}", where=f"functions[{comp.name}].reward_metric_weight",
                hint="name only metrics the reward returns in reward_metrics (check it with "
                     "rltune test-functions), or remove reward_metric_weight") from None
        except InvalidReward as exc:
            r.reward_error = r.reward_error or f"reward {comp.name}: {exc}"
            return
        if reward.reward_metrics:
            r.component_metrics[comp.name] = dict(reward.reward_metrics)


def sampled_ids(r: RolloutResult) -> list[int]:
    """The token ids the policy sampled in a rollout, in order (every turn's completion)."""
    return [t for seq in r.sequences
            for t, m in zip(seq.input_ids, seq.loss_mask, strict=False) if m]


def _discard_group(results: list[RolloutResult], why: Optional[str]) -> bool:
    """Drop every rollout of the group when one of them was discarded (``why`` is set)."""
    if why is None:
        return False
    for r in results:
        r.discarded = True
        r.score = None
        r.reward_error = r.reward_error or f"group discarded ({why})"
    return True
