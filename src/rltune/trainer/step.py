"""What a training step does with its rollouts: learn, sync, validate (``StepRunner``).

The step itself, top to bottom, is ``StepScheduler.run_step`` (``trainer/scheduler.py``):
take the batch from the group stream (``trainer/stream.py``, the only collector) → learn →
sync → advance. This module has the halves it calls:

* ``run_group``: ``n_rollouts`` rollouts of one prompt, scored together by the reward
  functions (when the signal uses them), through ``rltune.rollout.groups.run_group`` (the path
  evaluation and ``rltune test-functions`` share); the stream runs every group through it.
* ``learn``: the job's ``Signal`` (``trainer/signals/table.py``, chosen by the advantage estimator)
  turns the collected rollouts into rows with one advantage per token, and the ``Updater``
  runs the mini-batch updates on them.
* ``sync``: the new weights go to the engine (``TrainingRuntime.sync_weights``).
* ``validate``: the validation prompts through the same ``run_group``, without learning.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from rltune.config.data import DataRow, EpochSampler
from rltune.engine.meter import EngineTokenMeter
from rltune.rollout.groups import run_group
from rltune.rollout.results import RolloutResult
from rltune.sdk.data import validation_sample_id
from rltune.trainer.device import MemoryMeter
from rltune.trainer.metrics import rollout_metrics
from rltune.trainer.protocols import Signal, StepRuntime
from rltune.trainer.rows import record_notes
from rltune.trainer.staleness import stamp_staleness
from rltune.trainer.stream import Collected


@dataclass
class StepResult:
    """What a step produced: its metrics, its rollouts, and why rollouts could not train."""

    metrics: dict[str, float]
    results: list[RolloutResult]
    failures: Counter[str] = field(default_factory=Counter)  # failure message -> rollouts
    updated: bool = False  # the policy changed (its weights still have to reach the engine)

    @property
    def failed(self) -> bool:
        """No rollout of the step could be learned from (nothing ran or scored)."""
        return bool(self.results) and sum(self.failures.values()) == len(self.results)


class StepRunner:
    """Runs training steps and validation passes against a started ``TrainingRuntime``."""

    def __init__(self, rt: StepRuntime, signal: Signal, *, job_id: str, train_rows: list[DataRow],
                 sampler: EpochSampler):
        self.rt, self.signal = rt, signal
        self.hp, self.knobs = rt.hp, rt.knobs
        self.job_id, self.train_rows, self.sampler = job_id, train_rows, sampler
        self.memory = MemoryMeter(rt.device)
        self.engine_tokens = EngineTokenMeter(rt.engine)  # engine/prompt_tokens, prefill_tokens
        self._asleep = False  # the engine was put to sleep for this step's update

    async def learn(self, collected: Collected, *, sleep_engine: bool) -> StepResult:
        """Training rows from the collected rollouts, then the update (the trainer's half).

        ``sleep_engine``: let the engine free its accelerator memory for the update (only when
        no rollout is sampling meanwhile); ``sync`` wakes it.
        """
        step, results = collected.step, collected.results
        out = await self.signal.rows(results)
        record_notes(results, out.notes)  # the reward and advantages each rollout trained with
        rows = out.rows
        stamp_staleness(rows, results, policy_version=self.rt.engine.weight_version)
        metrics = rollout_metrics(results, scored=self.signal.scores_rollouts)
        metrics.update(out.metrics)
        metrics["timing/s/rollout"] = collected.seconds
        metrics["train/sampling_rounds"] = float(collected.rounds)
        if rows:
            if sleep_engine:
                await self.rt.engine.sleep()  # vLLM on a shared GPU frees its memory; else no-op
                self._asleep = True
            metrics.update(await self.rt.updater.aupdate(rows))
        elif reason := self.signal.no_rows_reason:  # e.g. PPO's critic warm-up
            self.rt.log(f"step {step}: {reason}; no policy update")
        else:
            self.rt.log(f"step {step}: no rollout carried a learning signal; no update",
                        level="WARNING")
        metrics["train/trainable_rows"] = float(len(rows))
        return StepResult(metrics, results, self._failures(step, results), updated=bool(rows))

    async def sync(self) -> float:
        """Send the updated weights to the engine (and wake it); returns the seconds taken."""
        t_sync = time.perf_counter()
        await self.rt.sync_weights()
        if self._asleep:
            await self.rt.engine.wake_up()
            self._asleep = False
        return time.perf_counter() - t_sync

    def finish(self, result: StepResult, t_step: float) -> StepResult:
        """The step's wall-clock metrics, measured from ``t_step``."""
        metrics = result.metrics
        metrics["timing/s/step"] = time.perf_counter() - t_step
        tokens = sum(r.response_tokens for r in result.results if r.ok)
        metrics["perf/throughput"] = tokens / max(metrics["timing/s/step"], 1e-9)
        metrics.update(self.memory.metrics())
        metrics.update(self.engine_tokens.metrics())
        return result

    def _failures(self, step: int, results: list[RolloutResult]) -> Counter[str]:
        """Log each rollout that cannot train (or trains without its reward); count why."""
        failures: Counter[str] = Counter()
        for r in results:
            why = r.error or r.reward_error
            if not self.signal.trains(r):
                failures[why or "the rollout has no score"] += 1
                self.rt.log(f"step {step}: rollout {r.rollout_id} dropped: {why}",
                            level="WARNING")
            elif r.reward_error:
                self.rt.log(f"step {step}: rollout {r.rollout_id} reward failed (it trains "
                            f"anyway): {r.reward_error}", level="WARNING")
        return failures

    async def run_group(self, row: DataRow, row_index: int, step: int, sample_index: int,
                        n: int) -> list[RolloutResult]:
        """``n`` rollouts of one prompt, scored together (a group reward sees all of them)."""
        return await run_group(
            self.rt.runner, self.rt.rewarder if self.signal.scores_rollouts else None, row,
            sample_id=f"{self.job_id}-s{step}-p{sample_index}", sample_index=sample_index,
            row_index=row_index, n=n, trainer_state={"global_step": step})

    async def validate(self, rows: list[DataRow]) -> dict[str, float]:
        """Expected reward of one sampled rollout per validation prompt (``mean@1``).

        With ``val_n_rollouts > 1`` each prompt is sampled that many times and the rewards are
        averaged: the same quantity, estimated with less noise. Rollouts sample at
        ``val_temperature`` when it is set (``runtime.val_runner``). The signal adds its own
        validation metrics (OPD: the reverse KL to the teacher).
        """
        t0 = time.perf_counter()
        n = self.hp.val_n_rollouts
        groups = await asyncio.gather(*(
            run_group(self.rt.val_runner,
                      self.rt.rewarder if self.signal.scores_rollouts else None,
                      row, sample_id=validation_sample_id(self.job_id, i), sample_index=i,
                      row_index=i, n=n)  # the functions see phase "test"
            for i, row in enumerate(rows)))
        results = [r for g in groups for r in g]
        out: dict[str, float] = {"validation/data/samples": float(len(results))}
        if self.signal.scores_rollouts:
            scores = [float(r.score) if r.usable else 0.0 for r in results]  # type: ignore[arg-type]
            out["validation/data/reward/mean@1"] = sum(scores) / len(scores) if scores else 0.0
            out["validation/data/failed"] = float(sum(not r.usable for r in results))
        else:  # nothing is scored: only a rollout that failed is a failure
            out["validation/data/failed"] = float(sum(not r.ok for r in results))
        out.update(await self.signal.validation(results))
        out["timing/s/validation"] = time.perf_counter() - t0
        return out
