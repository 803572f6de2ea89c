"""The training step loop (DESIGN.md §3), readable top to bottom.

One step: take ``batch_size`` prompts → run ``n_rollouts`` rollouts of each through the
function pool (rollouts call the policy gateway with per-rollout keys) → turn captured calls
into token-exact rows → score with the reward functions → group advantages → PPO-style update
in ``ppo_mini_batch_size`` mini-batches → copy the new weights into the engine → validate every
``eval_steps`` → checkpoint per ``save_strategy``.

On-policy distillation (``training.type: pg_opd``) runs the same loop with the teacher as the
signal: every token the student sampled gets the advantage ``-(log pi - log pi_teacher)``;
reward functions are optional and, when configured, only reported.

Example (see tests/trainer/test_learning.py for a real run)::

    trainer = Trainer(load_job_config("job.yaml"), job_dir="runs/ft-1")
    summary = asyncio.run(trainer.run())
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from rltune.config import JobConfig
from rltune.config.data import DataRow, EpochSampler, load_dataset
from rltune.config.datasets import TrainingType
from rltune.observability.session import JobObservability
from rltune.sdk.errors import ConfigError
from rltune.trainer.metrics import rollout_metrics
from rltune.trainer.rollouts import RolloutResult
from rltune.trainer.runtime import TrainingRuntime
from rltune.trainer.sink import FileSink, Sink

ProgressFn = Callable[[dict[str, Any]], None]


class Trainer:
    """Runs one job in this process. ``await run()`` returns a summary dict."""

    def __init__(
        self,
        config: JobConfig,
        *,
        job_dir: str | Path,
        job_id: Optional[str] = None,
        base_dir: str | Path | None = None,
        sink: Optional[Sink] = None,
        progress: Optional[ProgressFn] = None,
    ):
        self.config = config
        self.hp = config.hyper_parameters
        self.knobs = config.knobs
        self.job_dir = Path(job_dir)
        self.job_dir.mkdir(parents=True, exist_ok=True)
        self.job_id = job_id or f"ft-{secrets.token_hex(6)}"
        self.base_dir = Path(base_dir) if base_dir else Path.cwd()
        self.sink = sink or FileSink(self.job_dir)
        self.progress = progress or (lambda state: None)
        self.opd = config.training.type is TrainingType.PG_OPD
        self.train_rows = self._load_rows(config.training_datasets, "training")
        self.val_rows = self._load_rows(config.validation_datasets, "validation")
        config.check_dataset_rows(len(self.train_rows))
        self.total_steps = self.hp.total_steps(len(self.train_rows))
        self.sampler = EpochSampler(len(self.train_rows), self.hp.batch_size, self.hp.seed)
        self.history: list[dict[str, Any]] = []
        self.initial_validation: Optional[float] = None

    def _load_rows(self, datasets: list[Any], what: str) -> list[DataRow]:
        rows: list[DataRow] = []
        for ds in datasets:
            if not ds.file_name:
                raise ConfigError(
                    f"{what} dataset has no file_name",
                    where="datasets",
                    hint="give file_name: path/to/data.jsonl (file ids need the job server)",
                )
            rows.extend(load_dataset(self.config.resolve_path(ds.file_name, base=self.base_dir)))
        return rows

    # ------------------------------------------------------------------ the run

    async def run(self, resume_from: str | Path | None = None) -> dict[str, Any]:
        # Trackers start (or fail) and tracing attaches before anything loads.
        with JobObservability.open(self.config, job_dir=self.job_dir, job_id=self.job_id,
                                   sink=self.sink, resume_from=resume_from) as obs:
            self.obs, outer, self.sink = obs, self.sink, obs.sink
            try:
                return await self._run(resume_from)
            finally:
                self.sink = outer

    async def _run(self, resume_from: str | Path | None = None) -> dict[str, Any]:
        hp = self.hp
        log = self.sink.log
        log(
            f"job {self.job_id}: {self.total_steps} steps, algorithm {hp.algorithm}, "
            f"{len(self.train_rows)} training rows, {len(self.val_rows)} validation rows"
        )
        async with TrainingRuntime(
            self.config,
            job_dir=self.job_dir,
            base_dir=self.base_dir,
            job_id=self.job_id,
            total_steps=self.total_steps,
            log=log,
        ) as rt:
            self.rt = rt
            start_step = 0
            if resume_from is not None:
                start_step = await rt.restore(resume_from, self.sampler)
                log(f"resumed from {resume_from} at step {start_step}")
            val = None
            if self.val_rows and start_step == 0:
                val = await self.validate()
                self.sink.metrics(0, val)
                self.initial_validation = val.get("validation/data/reward/mean@1")
                log(f"validation before training: reward {_fmt(self.initial_validation)}"
                    + (f", teacher KL {_fmt(val.get('validation/teacher_kl'))}"
                       if self.opd else ""))
            for step in range(start_step + 1, self.total_steps + 1):
                with self.obs.step(step):
                    metrics = await self.train_step(step)
                epoch_done = self.sampler.position + hp.batch_size > self.sampler.n_rows
                if self.val_rows and (step % hp.eval_steps == 0 or step == self.total_steps):
                    val = await self.validate()
                    metrics.update(val)
                self.sink.metrics(step, metrics)
                self.history.append({"step": step, **metrics})
                self._report(step, metrics, val)
                if self._should_save(step, epoch_done):
                    path = rt.save(step, self.sampler, self._trainer_state(step))
                    log(f"saved checkpoint {path}")
            summary = self._summary()
        last = self.history[-1]["step"] if self.history else 0
        self.sink.progress(
            {**summary, "step": last, "total_steps": self.total_steps, "state": "finished"}
        )
        log(f"finished: {summary}")
        return summary

    async def train_step(self, step: int) -> dict[str, Any]:
        t_step = time.perf_counter()
        results, rounds = await self._collect_groups(step)
        t_rollout = time.perf_counter() - t_step
        raw = {r.rollout_id: r.reward for r in results if r.scored and r.reward_error is None}
        if self.opd:
            trainable, teacher_kl = await asyncio.to_thread(self.rt.distillation_rows, results)
        else:
            trainable = self.rt.assign_advantages(results)
        metrics = rollout_metrics(results, raw)
        if self.opd:
            self._distillation_metrics(metrics, results, teacher_kl)
        metrics["timing/s/rollout"] = t_rollout
        metrics["train/sampling_rounds"] = float(rounds)
        if trainable:
            update = await self.rt.updater.aupdate(trainable)
            metrics.update(update)
            t_sync = time.perf_counter()
            await self.rt.sync_weights()
            metrics["timing/s/sync"] = time.perf_counter() - t_sync
        else:
            self.sink.log(
                f"step {step}: no rollout carried a learning signal; no update", level="WARNING"
            )
        tokens = sum(r.response_tokens for r in results if r.ok)
        metrics["timing/s/step"] = time.perf_counter() - t_step
        metrics["perf/throughput"] = tokens / max(metrics["timing/s/step"], 1e-9)
        metrics["train/trainable_rows"] = float(len(trainable))
        self.sink.trajectories(step, (self.rt.trajectory(r) for r in results))
        for r in results:
            if not r.ok or r.reward_error:
                what = "reward failed (OPD trains on it anyway)" if r.ok and self.opd else "dropped"
                self.sink.log(
                    f"step {step}: rollout {r.rollout_id} {what}: {r.error or r.reward_error}",
                    level="WARNING",
                )
        return metrics

    def _distillation_metrics(
        self, metrics: dict[str, Any], results: list[RolloutResult], teacher_kl: float
    ) -> None:
        """OPD: a rollout is dropped only when it failed (rewards are metrics only)."""
        metrics["train/dropped_rollouts"] = float(sum(not r.ok for r in results))
        if not self.rt.rewarder.components:
            # No reward function: reward rates would read as "nothing was scored".
            metrics.pop("trace/success_rate/reward", None)
            metrics.pop("train/frac_reward_zero_std", None)
        if math.isfinite(teacher_kl):
            metrics["actor/teacher_kl"] = teacher_kl

    async def _collect_groups(self, step: int) -> tuple[list[RolloutResult], int]:
        """Run the step's groups; DAPO dynamic sampling refills groups without signal."""
        hp = self.hp
        batch = self.sampler.next_batch()
        kept: list[list[RolloutResult]] = []
        rounds = 0
        sample_index = 0
        while True:
            rounds += 1
            groups = await asyncio.gather(
                *(
                    self._run_group(
                        self.train_rows[idx], idx, step, sample_index + i, hp.n_rollouts
                    )
                    for i, idx in enumerate(batch)
                )
            )
            sample_index += len(batch)
            if not self.knobs.dynamic_sampling:
                kept.extend(groups)
                break
            kept.extend(g for g in groups if _has_signal(g))
            missing = hp.batch_size - len(kept)
            if missing <= 0 or rounds >= self.knobs.max_sampling_rounds:
                if missing > 0:  # out of rounds: keep what there is (possibly flat groups)
                    kept.extend(g for g in groups if not _has_signal(g))
                break
            batch = self.sampler.sample_extra(missing)
        kept = kept[: hp.batch_size] if self.knobs.dynamic_sampling else kept
        return [r for g in kept for r in g], rounds

    async def _run_group(
        self,
        row: DataRow,
        row_index: int,
        step: int,
        sample_index: int,
        n: int,
    ) -> list[RolloutResult]:
        sample_id = f"{self.job_id}-s{step}-p{sample_index}"
        results = await asyncio.gather(
            *(
                self.rt.runner.run(
                    row,
                    rollout_id=f"{sample_id}.r{k}",
                    sample_id=sample_id,
                    sample_index=sample_index,
                    row_index=row_index,
                )
                for k in range(n)
            )
        )
        if not self.opd or self.rt.rewarder.components:  # OPD may have no reward function
            await self.rt.rewarder.score_group(list(results), row.ground_truth)
        return list(results)

    async def validate(self) -> dict[str, float]:
        """Expected reward of one sampled rollout per validation prompt (``mean@1``).

        With ``val_n_rollouts > 1`` each prompt is sampled that many times and the rewards are
        averaged: the same quantity, estimated with less noise. OPD also reports the reverse
        KL to the teacher on these rollouts, and the reward only when it has reward functions.
        """
        t0 = time.perf_counter()
        n = self.hp.val_n_rollouts
        groups = await asyncio.gather(
            *(self._run_group(row, i, 0, i, n) for i, row in enumerate(self.val_rows))
        )
        results = [r for g in groups for r in g]
        out: dict[str, float] = {"validation/data/samples": float(len(results))}
        if not self.opd or self.rt.rewarder.components:
            scores = [r.reward if r.scored and r.reward_error is None else 0.0 for r in results]
            failed = sum(1 for r in results if not (r.scored and r.reward_error is None))
            out["validation/data/reward/mean@1"] = sum(scores) / len(scores) if scores else 0.0
        else:  # OPD without reward functions: only a rollout that failed is a failure
            failed = sum(1 for r in results if not r.ok)
        out["validation/data/failed"] = float(failed)
        if self.opd:
            _, teacher_kl = await asyncio.to_thread(self.rt.distillation_rows, results)
            if math.isfinite(teacher_kl):
                out["validation/teacher_kl"] = teacher_kl
        out["timing/s/validation"] = time.perf_counter() - t0
        return out

    # ------------------------------------------------------------------ bookkeeping

    def _should_save(self, step: int, epoch_done: bool) -> bool:
        strategy = self.hp.save_strategy
        if strategy == "no":
            return False
        if strategy == "steps":
            return step % self.hp.save_steps == 0 or step == self.total_steps
        return epoch_done or step == self.total_steps

    def _trainer_state(self, step: int) -> dict[str, Any]:
        vals = [
            h["validation/data/reward/mean@1"]
            for h in self.history
            if "validation/data/reward/mean@1" in h
        ]
        return {
            "job_id": self.job_id,
            "step": step,
            "total_steps": self.total_steps,
            "validation_reward": vals[-1] if vals else None,
            "trackers": self.obs.run_ids(),
        }

    def _report(self, step: int, metrics: dict[str, Any], val: Optional[dict[str, float]]) -> None:
        state = {
            "job_id": self.job_id,
            "step": step,
            "total_steps": self.total_steps,
            "reward": metrics.get("critic/rewards/mean"),
            "validation_reward": (val or {}).get("validation/data/reward/mean@1"),
            "tokens_per_s": metrics.get("perf/throughput"),
            "step_seconds": metrics.get("timing/s/step"),
            "state": "running",
        }
        if self.opd:
            state["teacher_kl"] = metrics.get("actor/teacher_kl")
        self.sink.progress(state)
        self.progress(state)
        distill = f"teacher KL {_fmt(state['teacher_kl'])} " if self.opd else ""
        self.sink.log(
            f"step {step}/{self.total_steps} reward {_fmt(state['reward'])} "
            f"val {_fmt(state['validation_reward'])} {distill}"
            f"{metrics.get('timing/s/step', 0):.1f}s"
        )

    def _summary(self) -> dict[str, Any]:
        vals = [
            (h["step"], h["validation/data/reward/mean@1"])
            for h in self.history
            if "validation/data/reward/mean@1" in h
        ]
        rewards = [h["critic/rewards/mean"] for h in self.history if "critic/rewards/mean" in h]
        return {
            "job_id": self.job_id,
            "steps": len(self.history),
            "validation": vals,
            "initial_validation": self.initial_validation,
            "final_reward": rewards[-1] if rewards else None,
            "checkpoints": [str(p) for p in self.rt.checkpoints()],
        }


def _has_signal(group: list[RolloutResult]) -> bool:
    rewards = [r.reward for r in group if r.scored and r.reward_error is None]
    return len(rewards) >= 2 and max(rewards) - min(rewards) > 1e-8


def _fmt(value: Any) -> str:
    return (
        "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"
    )
