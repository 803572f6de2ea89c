"""The training job, readable top to bottom (docs/design.md, "The step").

``Trainer.run``: start the runtime (``trainer/runtime.py``) → restore a checkpoint when
resuming → validate before training → for every step: run it (``trainer/step.py``: collect
groups → score → training rows → update → sync; ``trainer/scheduler.py`` decides whether the
next step's rollouts already sample during this step's update, ``max_staleness``), validate
every ``eval_steps``, write the step's outputs, report progress, checkpoint per
``save_strategy``, end early once validation reaches ``stop_at_validation_reward``, a budget
(``max_wall_time``, ``max_tokens``) is spent or someone asked the job to stop (``stop``: the job
folder's stop request, ``JobDir.request_stop``; the step's checkpoint is saved) → summary →
job-end hook.

What the step learns from is the job's signal (``trainer/signals/table.py``), chosen by the
advantage estimator: group advantages of rewards (GRPO, GSPO, DAPO), a critic's GAE
advantages (PPO, ``trainer/signals/ppo.py``) or the teacher's per-token advantages (on-policy
distillation, ``training.type: pg_opd``). An ``algorithm: sft`` job runs supervised steps on
its rows' messages instead (``trainer/sft.py``), an ``algorithm: dpo`` job preference steps on
its rows' chosen and rejected responses (``trainer/dpo.py``), with the same validation,
checkpoints and outputs.

A job whose steps have no successful rollouts ends FAILED (``trainer/outcome.py``). A step's
outputs (metrics, trajectories) are written once per step: a resumed job that replays a step
replaces them (``trainer/sink.py``).

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
from typing import Any, Optional, Protocol

from rltune.config import JobConfig
from rltune.config.data import DataRow, EpochSampler
from rltune.doctor.advisor import Advisor
from rltune.jobdir import JobDir
from rltune.observability.session import JobObservability
from rltune.rollout.results import trajectory_record
from rltune.sdk.errors import ConfigError
from rltune.trainer.data_prep import load_job_rows
from rltune.trainer.dpo import DpoSteps
from rltune.trainer.metrics import ark_aliases
from rltune.trainer.outcome import FailedSteps, PluginFailures
from rltune.trainer.protocols import Stateful
from rltune.trainer.runtime import TrainingRuntime, resolve_model_path
from rltune.trainer.scheduler import StepScheduler
from rltune.trainer.sft import SftSteps
from rltune.trainer.signals.table import build_signal
from rltune.trainer.sink import Sink, build_sink
from rltune.trainer.step import StepResult, StepRunner

ProgressFn = Callable[[dict[str, Any]], None]
VAL_REWARD = "validation/data/reward/mean@1"
#: The jobs that train on their rows alone (``rltune.names.OFFLINE_ALGORITHMS``).
OFFLINE_STEPS: dict[str, type[SftSteps] | type[DpoSteps]] = {"sft": SftSteps, "dpo": DpoSteps}


class JobSteps(Protocol):
    """What the loop runs a job's steps with: ``StepScheduler`` over ``StepRunner`` (RL) or
    ``SftSteps`` / ``DpoSteps`` (both halves in one)."""

    async def run_step(self, step: int) -> StepResult: ...
    def data_order(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...


class JobValidation(Protocol):
    async def validate(self, rows: list[DataRow]) -> dict[str, float]: ...


class JobSignal(Protocol):
    """What the loop reads of the job's signal: the progress fields and the checkpointed
    critic state (an RL ``Signal``, or SFT's stand-in)."""

    @property
    def progress_fields(self) -> dict[str, tuple[str, str]]: ...
    @property
    def critic(self) -> Optional[Stateful]: ...


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
        functions_as_user: bool = False,
    ):
        """``functions_as_user``: the functions run as the user's own script would (a local
        ``rltune train`` or ``plan``; never on the job server), see ``TrainingRuntime``."""
        self.config = config
        self.functions_as_user = functions_as_user
        self.hp = config.hyper_parameters
        self.job_dir = Path(job_dir)
        self.job_dir.mkdir(parents=True, exist_ok=True)
        self.job_id = job_id or f"ft-{secrets.token_hex(6)}"
        self.base_dir = Path(base_dir) if base_dir else Path.cwd()
        self.sink = sink or build_sink(self.job_dir, config)
        self.progress = progress or (lambda state: None)
        self.train_rows, self.val_rows = load_job_rows(
            config, resolve=self._dataset_path, log=self.sink.log)  # data_options applied
        config.check_dataset_rows(len(self.train_rows))
        self.total_steps = self.hp.total_steps(len(self.train_rows))
        self.sampler = EpochSampler(len(self.train_rows), self.hp.batch_size, self.hp.seed)
        self.history: list[dict[str, Any]] = []
        self.initial_validation: Optional[float] = None
        self.stopped_at: Optional[int] = None  # the step whose validation reached the target
        self.budget_stop: Optional[dict[str, Any]] = None  # max_wall_time / max_tokens reached
        self.stop_request: Optional[dict[str, Any]] = None  # `stop` asked at this step
        self.tokens = 0  # sampled tokens (prompt + response) of the training rollouts
        self.advisor = Advisor(config.advisor, self.job_dir)  # the doctor: alerts.jsonl

    def _dataset_path(self, ds: Any) -> Path:
        if not ds.file_name:
            raise ConfigError(
                f"{ds.type.value} dataset has no file_name",
                where="datasets",
                hint="give file_name: path/to/data.jsonl (file ids need the job server)",
            )
        return Path(self.config.resolve_path(ds.file_name, base=self.base_dir))

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

    async def _run(self, resume_from: str | Path | None) -> dict[str, Any]:
        from rltune.config.lengths import fit_job

        # the one length rule (rltune.config.lengths), once the model is here (a demo builds)
        self.config, notes = fit_job(self.config, resolve_model_path(self.config.model.name
                                                                     or ""))
        self.hp = self.config.hyper_parameters
        hp, log = self.hp, self.sink.log
        for note in notes:
            log(note)
        log(f"job {self.job_id}: {self.total_steps} steps, algorithm {hp.algorithm}, "
            f"{len(self.train_rows)} training rows, {len(self.val_rows)} validation rows")
        async with TrainingRuntime(self.config, job_dir=self.job_dir, base_dir=self.base_dir,
                                   job_id=self.job_id, total_steps=self.total_steps,
                                   log=log, functions_as_user=self.functions_as_user) as rt:
            self.rt = rt
            self.steps: JobValidation
            self.scheduler: JobSteps
            self.signal: JobSignal
            if hp.algorithm in OFFLINE_STEPS:  # SFT / DPO on the rows alone: no rollouts
                offline = OFFLINE_STEPS[hp.algorithm](rt, train_rows=self.train_rows,
                                                      sampler=self.sampler)
                self.steps = self.scheduler = offline
                self.signal = offline.signal
            else:
                signal = build_signal(hp, rt.knobs, updater=rt.updater, teacher=rt.teacher,
                                      has_rewards=bool(rt.rewarder.components))
                steps = StepRunner(rt, signal, job_id=self.job_id, train_rows=self.train_rows,
                                   sampler=self.sampler)
                self.signal, self.steps = signal, steps
                self.scheduler = StepScheduler(steps, total_steps=self.total_steps,
                                               max_staleness=hp.max_staleness,
                                               partial_rollouts=hp.partial_rollouts)
            try:
                summary = await self._train(resume_from)
            finally:
                await self.scheduler.close()  # rollouts sampled ahead of a failed step
        last = self.history[-1]["step"] if self.history else 0
        self.sink.progress(
            {**summary, "step": last, "total_steps": self.total_steps, "state": "finished"}
        )
        log(f"finished: {summary}")
        self._on_job_end(summary)
        return summary

    async def _train(self, resume_from: str | Path | None) -> dict[str, Any]:
        """Validate, then every step: run it, validate, write, report, checkpoint."""
        hp, log = self.hp, self.sink.log
        start_step = await self._restore(resume_from) if resume_from is not None else 0
        failed = FailedSteps(planned=self.total_steps - start_step,
                             max_share=hp.max_failed_step_share)
        plugin_failures = PluginFailures(limit=hp.max_plugin_failures)
        val, trained = None, False
        self.t_train = time.monotonic()
        if self.val_rows and start_step == 0:
            val = await self.steps.validate(self.val_rows)
            self.sink.metrics(0, {**val, **ark_aliases(val)})
            self.initial_validation = val.get(VAL_REWARD)
            log(f"validation before training: reward {_fmt(self.initial_validation)}"
                + "".join(f", {label} {_fmt(val.get(metric.replace('actor/', 'validation/')))}"
                          for metric, label in self.signal.progress_fields.values()))
        ended = time.perf_counter()  # the previous step's end: its metrics line's time
        for step in range(start_step + 1, self.total_steps + 1):
            with self.obs.step(step):  # one trace per step
                result = await self.scheduler.run_step(step)
            metrics = result.metrics
            order = self.scheduler.data_order()  # not moved by rollouts sampled ahead
            epoch_done = order["position"] + hp.batch_size > order["n_rows"]
            if self.val_rows and (step % hp.eval_steps == 0 or step == self.total_steps):
                val = await self.steps.validate(self.val_rows)
                metrics.update(val)
                self.stopped_at = self._reached_target(step, val)
            now = time.perf_counter()
            wall_clock(metrics, now - ended - metrics.get("timing/s/validation", 0.0))
            ended = now
            metrics.update(ark_aliases(metrics))  # Ark's console names, next to ours
            # in a thread: the event loop serves the gateway and the rollouts sampling ahead
            await asyncio.to_thread(self._write_outputs, step, result)
            self._report(step, metrics, val)
            plugin_failures.add(step, result.results)
            trained |= not failed.add(step, result.failures, rollouts=len(result.results))
            self.budget_stop = self._budget_reached(step, result)
            self.stop_request = self._stop_requested(step)
            if self._should_save(step, epoch_done):
                if trained:  # else the model is the same as at the last save (or start)
                    log(f"saved checkpoint {self._save(step)}")
                    trained = False
                else:
                    log(f"no checkpoint at step {step}: no step since the last one had a "
                        "successful rollout, so the model has not changed")
            if self.stopped_at is not None or self.budget_stop is not None or self.stop_request:
                break
        return self._summary()

    def _reached_target(self, step: int, val: dict[str, float]) -> Optional[int]:
        """The step, when its validation reached ``stop_at_validation_reward`` (the job ends)."""
        target, value = self.hp.stop_at_validation_reward, val.get(VAL_REWARD)
        if target is None or value is None or math.isnan(value) or value < target:
            return None
        if step < self.total_steps:
            self.sink.log(f"validation reward {value:.3f} reached stop_at_validation_reward "
                          f"{target:g} at step {step}: the job ends here")
        return step

    def _budget_reached(self, step: int, result: StepResult) -> Optional[dict[str, Any]]:
        """``max_wall_time`` / ``max_tokens`` spent at this step (the job ends here)."""
        self.tokens += sum(r.response_tokens + (r.sequences[0].prompt_length if r.sequences else 0)
                           for r in result.results)
        spent = {"max_wall_time": time.monotonic() - self.t_train, "max_tokens": self.tokens}
        for knob, used in spent.items():
            limit = getattr(self.hp, knob)
            if limit is not None and used >= limit and step < self.total_steps:
                self.sink.log(f"{knob} {limit:g} reached at step {step} ({used:.0f} used): "
                              "the job ends here")
                return {"budget": knob, "limit": limit, "used": round(float(used), 3),
                        "step": step}
        return None

    def _stop_requested(self, step: int) -> Optional[dict[str, Any]]:
        """``stop`` was asked (the job folder's stop request): the job ends after this step."""
        asked = JobDir(self.job_dir).read_stop_request()
        if asked is None or step >= self.total_steps:
            return None
        self.sink.log(f"stop requested: the job ends at step {step} with a checkpoint")
        return {**asked, "step": step}

    def _write_outputs(self, step: int, result: StepResult) -> None:
        """The step's metrics and trajectories (each replaces what a replayed step wrote),
        and the doctor's alerts for the step (``rltune.doctor``). Runs in a worker thread
        (serialising a step's trajectories and their spans took a tenth of the event loop that
        the gateway and the next step's rollouts share); the loop waits for it."""
        records = [trajectory_record(r) for r in result.results]
        self.sink.metrics(step, result.metrics)
        self.sink.trajectories(step, records)
        self.history.append({"step": step, **result.metrics})
        for alert in self.advisor.observe(step, result.metrics, records):
            self.sink.log(f"doctor: {alert.line()}", level="WARNING")
            self.sink.alert(step, alert.code, alert.title, alert.line())

    def _on_job_end(self, summary: dict[str, Any]) -> None:
        """Called once after a job trained to the end, with its summary (seam for outputs
        registered when a job finishes)."""

    # ------------------------------------------------------------------ checkpoints

    def _should_save(self, step: int, epoch_done: bool) -> bool:
        strategy = self.hp.save_strategy
        if self.stop_request:  # a stopped job keeps what it learned, whatever the strategy
            return True
        if strategy == "no":
            return False
        last = step == self.total_steps or step == self.stopped_at \
            or self.budget_stop is not None
        if strategy == "steps":
            return step % self.hp.save_steps == 0 or last
        return epoch_done or last

    def _save(self, step: int) -> Path:
        from rltune.trainer.checkpoint import save_checkpoint

        vals = [h[VAL_REWARD] for h in self.history if VAL_REWARD in h]
        state = {"job_id": self.job_id, "step": step, "total_steps": self.total_steps,
                 "validation_reward": vals[-1] if vals else None,
                 "trackers": self.obs.run_ids(),  # a resumed job continues the same runs
                 "data_order": self.scheduler.data_order()}
        return save_checkpoint(self.rt.ckpt_root, step=step, model=self.rt.model,
                               tokenizer=self.rt.tokenizer, updater=self.rt.updater,
                               trainer_state=state, save_total_limit=self.hp.save_total_limit,
                               critic=self.signal.critic, **self.rt.checkpoint_kwargs())

    async def _restore(self, path: str | Path) -> int:
        """Load a checkpoint's weights and state into policy and engine; returns its step."""
        from rltune.trainer.checkpoint import restore_training_state

        self.rt.restore_policy(Path(path))
        state = restore_training_state(path, self.rt.updater, critic=self.signal.critic)
        self.sampler.load_state_dict(state["data_order"])
        await self.rt.sync_weights()
        self.sink.log(f"resumed from {path} at step {state['step']}")
        return int(state["step"])

    # ------------------------------------------------------------------ reporting

    def _report(self, step: int, metrics: dict[str, Any], val: Optional[dict[str, float]]) -> None:
        state = {
            "job_id": self.job_id,
            "step": step,
            "total_steps": self.total_steps,
            "reward": metrics.get("critic/rewards/mean"),
            "validation_reward": (val or {}).get(VAL_REWARD),
            "tokens_per_s": metrics.get("perf/throughput"),
            "step_seconds": metrics.get("timing/s/step"),
            "state": "running",
        }
        extra = ""
        for key, (metric, label) in self.signal.progress_fields.items():
            state[key] = metrics.get(metric)
            extra += f"{label} {_fmt(state[key])} "
        self.sink.progress(state)
        self.progress(state)
        self.sink.log(
            f"step {step}/{self.total_steps} reward {_fmt(state['reward'])} "
            f"val {_fmt(state['validation_reward'])} {extra}"
            f"{metrics.get('timing/s/step', 0):.1f}s"
        )

    def _summary(self) -> dict[str, Any]:
        from rltune.trainer.checkpoint import list_checkpoints

        vals = [(h["step"], h[VAL_REWARD]) for h in self.history if VAL_REWARD in h]
        rewards = [h["critic/rewards/mean"] for h in self.history if "critic/rewards/mean" in h]
        return {
            "job_id": self.job_id,
            "steps": len(self.history),
            "validation": vals,
            "initial_validation": self.initial_validation,
            "final_reward": rewards[-1] if rewards else None,
            "stopped_at_validation_reward": self.stopped_at,
            "stopped_by_budget": self.budget_stop,
            "stopped_by_request": self.stop_request,
            "checkpoints": [str(p) for p in list_checkpoints(self.rt.ckpt_root)],
        }


def wall_clock(metrics: dict[str, Any], seconds: float) -> None:
    """Make ``timing/s/step`` the wall clock since the previous step's end, less this step's
    validation (its own ``timing/s/validation``), so steps and validations add up to the job's
    time in every mode; ``timing/s/outside_step`` is the part of it outside the step's own
    bracket (the previous step's outputs and checkpoint, the loop's bookkeeping).

    >>> m = {"timing/s/step": 2.0, "perf/throughput": 100.0}
    >>> wall_clock(m, 2.5); m
    {'timing/s/step': 2.5, 'perf/throughput': 80.0, 'timing/s/outside_step': 0.5}
    """
    inner = float(metrics.get("timing/s/step", seconds))
    seconds = max(seconds, inner)  # the bracket lies inside the wall clock, never past it
    if "perf/throughput" in metrics:  # tokens over the step: the same tokens, the longer time
        metrics["perf/throughput"] *= inner / max(seconds, 1e-9)
    metrics["timing/s/step"] = seconds
    metrics["timing/s/outside_step"] = seconds - inner


def _fmt(value: Any) -> str:
    return (
        "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"
    )
