"""Dataset mode of ``rltune test-functions``: a rollout and its rewards over a dataset,
scored exactly as training scores them.

``n`` rollouts per prompt run against any OpenAI-compatible endpoint (``OpenEndpoint``: one
fixed key, no token capture) and each prompt's group is scored by ``run_group``, the path a
training step takes: the same ``reward_metric_weight`` and component weights, the same
non-finite check (such a rollout is dropped and counted), the same retries and the same discard
handling (a discarded group is dropped whole). The report gives counts, first errors, reward
distributions, latencies and learnability: the fraction of scored prompts whose group carries a
signal (``has_signal``; GRPO gets no gradient from the others).

Example::

    report = await run_dataset(load_dataset("data/val.jsonl"),
                               rollout="functions.rollout.Calc",
                               rewards=[RewardRef(classpath="functions.reward.Exact")],
                               n=8, model=ModelEndpoint(base_url=..., model=..., api_key=...))
    print(report.learnability)
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field

from rltune.config.data import DataRow
from rltune.functions.metrics import percentile
from rltune.functions.pool import FunctionPool
from rltune.functions.spec import FunctionComponentSpec
from rltune.rollout.groups import run_group
from rltune.rollout.results import RolloutResult, has_signal
from rltune.rollout.rewarder import RewardComponent, Rewarder
from rltune.rollout.runner import OpenEndpoint, RolloutRunner
from rltune.sdk.data import FunctionType, TaskStatus

_MAX_ERRORS = 3


class ModelEndpoint(BaseModel):
    """The OpenAI-compatible endpoint rollouts talk to."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "policy"
    api_key: str = "EMPTY"


class RewardRef(BaseModel):
    """One reward or group-reward function to apply, with its weight in the final reward."""

    classpath: str
    func_type: FunctionType = FunctionType.REWARD
    weight: float = 1.0
    #: ``reward_metric_weight`` of the job config: the score is ``Σ w·reward_metrics[m]``
    metric_weights: Optional[dict[str, float]] = None
    name: Optional[str] = None

    @property
    def label(self) -> str:
        return self.name or self.classpath


class Distribution(BaseModel):
    count: int = 0
    mean: Optional[float] = None
    std: Optional[float] = None
    min: Optional[float] = None
    p50: Optional[float] = None
    max: Optional[float] = None
    histogram: dict[str, int] = Field(default_factory=dict, description="value → count (top 10)")

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        if not values:
            return cls()
        ordered = sorted(values)
        hist = Counter(f"{v:.3g}" for v in values).most_common(10)
        return cls(count=len(values), mean=statistics.fmean(values),
                   std=statistics.pstdev(values), min=ordered[0], p50=percentile(ordered, 0.5),
                   max=ordered[-1], histogram=dict(hist))


class FunctionStats(BaseModel):
    """Calls of one function: outcomes, first errors, latency and (rewards) score distribution."""

    name: str
    succeeded: int = 0
    failed: int = 0
    first_errors: list[str] = Field(default_factory=list)
    latency_p50_s: Optional[float] = None
    latency_p95_s: Optional[float] = None
    scores: Distribution = Field(default_factory=Distribution)


class HarnessReport(BaseModel):
    prompts: int
    rollouts_per_prompt: int
    elapsed_s: float
    rollout: FunctionStats
    rewards: list[FunctionStats]
    final_reward: Distribution
    scored_prompts: int = Field(description="prompts with >= 2 scored rollouts")
    learnable_prompts: int = Field(description="of those, prompts whose rewards vary")
    learnability: Optional[float] = Field(description="learnable_prompts / scored_prompts")
    dropped_rollouts: int = Field(0, description="rollouts without a score to train on")
    discarded_prompts: int = Field(0, description="prompts whose group was discarded")
    first_drop_reasons: list[str] = Field(
        default_factory=list, description="why the first dropped rollouts have no score")
    prompt_rewards: list[list[Optional[float]]] = Field(
        default_factory=list,
        description="per prompt, each rollout's reward in rollout order (None: dropped)")


class _Tracker:
    def __init__(self, name: str):
        self.stats = FunctionStats(name=name)
        self.latencies: list[float] = []
        self.scores: list[float] = []

    def record(self, out: Any, seconds: float) -> None:
        self.latencies.append(seconds)
        if out.status == TaskStatus.SUCCESS:
            self.stats.succeeded += 1
            return
        self.stats.failed += 1
        if len(self.stats.first_errors) < _MAX_ERRORS:
            code = getattr(out, "error_code", None)
            self.stats.first_errors.append(f"[{code}] {out.error}" if code else str(out.error))

    def finish(self) -> FunctionStats:
        ordered = sorted(self.latencies)
        self.stats.latency_p50_s = percentile(ordered, 0.5)
        self.stats.latency_p95_s = percentile(ordered, 0.95)
        self.stats.scores = Distribution.of(self.scores)
        return self.stats


class _Tracked:
    """A function pool that records each call's outcome and latency (``gate``: at most that
    many calls in flight)."""

    def __init__(self, pool: FunctionPool, tracker: _Tracker,
                 gate: Optional[asyncio.Semaphore] = None):
        self.pool, self.tracker, self.gate = pool, tracker, gate

    async def call(self, input_data: Any, *, headers: Optional[dict[str, str]] = None) -> Any:
        async with self.gate or _NO_GATE:
            t0 = time.monotonic()
            out = await self.pool.call(input_data, headers=headers)
        self.tracker.record(out, time.monotonic() - t0)
        return out


class _NoGate:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: Any) -> None:
        return None


_NO_GATE = _NoGate()


def _labels(refs: Sequence[RewardRef]) -> list[str]:
    """One distinct name per reward (a classpath given twice gets ``#2``)."""
    seen: Counter[str] = Counter()
    out = []
    for ref in refs:
        seen[ref.label] += 1
        out.append(ref.label if seen[ref.label] == 1 else f"{ref.label}#{seen[ref.label]}")
    return out


async def run_dataset(
    rows: Sequence[DataRow], *, rollout: str, rewards: Sequence[RewardRef] = (), n: int = 4,
    concurrency: int = 16, model: ModelEndpoint | None = None, workspace: str | Path = ".",
    timeout: Optional[float] = None, sampling_params: Optional[dict[str, Any]] = None,
    max_retries: int = 0, on_progress: Optional[Callable[[int, int], None]] = None,
) -> HarnessReport:
    """Run ``n`` rollouts per prompt and score each prompt's group as a training step does.

    ``max_retries``: attempts after a FAILED rollout or reward (the job's
    ``max_rollout_retries``; 0 shows every failure as it happens).
    """
    model = model or ModelEndpoint()
    ws = Path(workspace)
    runtime = {"concurrency": max(1, concurrency), "capacity": 1, "min_capacity": 1,
               "max_capacity": 2}

    def spec(cp: str, ftype: FunctionType) -> FunctionComponentSpec:
        return FunctionComponentSpec(classpath=cp, func_type=ftype, workspace=ws,
                                     timeout=timeout, runtime=runtime)

    pools: list[FunctionPool] = []
    try:
        ro_pool = await FunctionPool.start(spec(rollout, FunctionType.ROLLOUT))
        pools.append(ro_pool)
        for ref in rewards:
            pools.append(await FunctionPool.start(spec(ref.classpath, ref.func_type)))
        return await _run(rows, ro_pool, list(zip(rewards, pools[1:], strict=True)), n=n,
                          concurrency=concurrency, model=model, sampling_params=sampling_params,
                          max_retries=max_retries, on_progress=on_progress)
    finally:
        await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)


async def _run(rows: Sequence[DataRow], ro_pool: FunctionPool,
               rewards: list[tuple[RewardRef, FunctionPool]], *, n: int, concurrency: int,
               model: ModelEndpoint, sampling_params: Optional[dict[str, Any]],
               max_retries: int, on_progress: Optional[Callable[[int, int], None]],
               ) -> HarnessReport:
    job = f"test-{uuid.uuid4().hex[:8]}"
    names = _labels([ref for ref, _ in rewards])
    ro_track = _Tracker(ro_pool.spec.classpath)
    rw_tracks = [_Tracker(name) for name in names]
    runner = RolloutRunner(
        _Tracked(ro_pool, ro_track, asyncio.Semaphore(max(1, concurrency))),
        OpenEndpoint(model.base_url, model.api_key), job_id=job, model_name=model.model,
        sampling_params=dict(sampling_params or {}), max_retries=max_retries)
    rewarder = Rewarder([
        RewardComponent(name=name, pool=_Tracked(pool, track),
                        group=ref.func_type is FunctionType.GROUP_REWARD, weight=ref.weight,
                        metric_weights=ref.metric_weights)
        for (ref, pool), track, name in zip(rewards, rw_tracks, names, strict=True)
    ], job_id=job, max_retries=max_retries)
    done, total = 0, len(rows) * n
    t_start = time.monotonic()

    async def one_prompt(i: int, row: DataRow) -> list[RolloutResult]:
        nonlocal done
        group = await run_group(runner, rewarder, row, sample_id=f"{job}-p{i}", sample_index=i,
                                row_index=i, n=n)
        done += n
        if on_progress:
            on_progress(done, total)
        return group

    groups = await asyncio.gather(*(one_prompt(i, row) for i, row in enumerate(rows)))
    return report(groups, n=n, elapsed_s=time.monotonic() - t_start, rollout=ro_track,
                  rewards=dict(zip(names, rw_tracks, strict=True)))


def report(groups: Sequence[Sequence[RolloutResult]], *, n: int, elapsed_s: float,
           rollout: _Tracker, rewards: dict[str, _Tracker]) -> HarnessReport:
    """The report of scored groups (one per prompt)."""
    results = [r for g in groups for r in g]
    for r in results:  # a component's scores: what it added to the rollouts' rewards
        for name, score in r.component_scores.items():
            rewards[name].scores.append(score)
    usable = [r for r in results if r.usable]
    scored = [g for g in groups if sum(r.usable for r in g) >= 2]
    learnable = sum(has_signal(g) for g in scored)
    drops = [r.failure for r in results if not r.usable and r.failure]
    return HarnessReport(
        prompts=len(groups), rollouts_per_prompt=n, elapsed_s=elapsed_s,
        rollout=rollout.finish(), rewards=[t.finish() for t in rewards.values()],
        final_reward=Distribution.of([float(r.score) for r in usable]),  # type: ignore[arg-type]
        scored_prompts=len(scored), learnable_prompts=learnable,
        learnability=(learnable / len(scored)) if scored else None,
        dropped_rollouts=len(results) - len(usable),
        discarded_prompts=sum(any(r.discarded for r in g) for g in groups),
        first_drop_reasons=list(dict.fromkeys(drops))[:_MAX_ERRORS],
        prompt_rewards=[[r.score if r.usable else None for r in g] for g in groups],
    )
