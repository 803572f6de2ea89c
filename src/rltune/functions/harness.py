"""Local test harness: run functions on one input, or a rollout and its rewards over a dataset.

Dataset mode samples ``n`` rollouts per prompt against any OpenAI-compatible endpoint, scores
each successful rollout with every reward function (and each prompt's group with the group
rewards), and reports counts, first errors, reward distributions, latencies and learnability:
the fraction of prompts whose ``n`` final rewards are not all equal (GRPO gets no gradient from
the others).

Example::

    report = await run_dataset(load_dataset("data/val.jsonl"),
                               rollout="functions.rollout.Calc",
                               rewards=[RewardRef("functions.reward.Exact")],
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

from rltune.functions.metrics import percentile
from rltune.functions.pool import FunctionPool
from rltune.functions.spec import FunctionComponentSpec
from rltune.sdk.data import (
    FunctionType,
    GroupRewardInput,
    RewardInput,
    RolloutInput,
    TaskStatus,
)

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


class _Tracker:
    def __init__(self, name: str):
        self.stats = FunctionStats(name=name)
        self.latencies: list[float] = []
        self.scores: list[float] = []

    def record(self, out: Any, seconds: float, score: Optional[float] = None) -> bool:
        self.latencies.append(seconds)
        if out.status == TaskStatus.SUCCESS:
            self.stats.succeeded += 1
            if score is not None:
                self.scores.append(score)
            return True
        self.stats.failed += 1
        if len(self.stats.first_errors) < _MAX_ERRORS:
            code = getattr(out, "error_code", None)
            self.stats.first_errors.append(f"[{code}] {out.error}" if code else str(out.error))
        return False

    def finish(self) -> FunctionStats:
        ordered = sorted(self.latencies)
        self.stats.latency_p50_s = percentile(ordered, 0.5)
        self.stats.latency_p95_s = percentile(ordered, 0.95)
        self.stats.scores = Distribution.of(self.scores)
        return self.stats


async def _timed(pool: FunctionPool, data: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    out = await pool.call(data)
    return out, time.monotonic() - t0


async def run_dataset(
    rows: Sequence[Any], *, rollout: str, rewards: Sequence[RewardRef] = (), n: int = 4,
    concurrency: int = 16, model: ModelEndpoint | None = None, workspace: str | Path = ".",
    timeout: Optional[float] = None, sampling_params: Optional[dict[str, Any]] = None,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> HarnessReport:
    """Run ``n`` rollouts per row (``rltune.config.data.DataRow``) and score them."""
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
        rw_pools = []
        for ref in rewards:
            p = await FunctionPool.start(spec(ref.classpath, ref.func_type))
            pools.append(p)
            rw_pools.append(p)
        pairs = list(zip(rewards, rw_pools, strict=True))
        return await _run(rows, ro_pool, pairs, n, concurrency, model, sampling_params,
                          on_progress)
    finally:
        await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)


async def _run(rows, ro_pool, rewards, n, concurrency, model, sampling_params,
               on_progress) -> HarnessReport:
    job = f"test-{uuid.uuid4().hex[:8]}"
    ro_track = _Tracker(ro_pool.spec.classpath)
    rw_tracks = [_Tracker(ref.label) for ref, _ in rewards]
    final: list[float] = []
    scored = learnable = 0
    done = 0
    total = len(rows) * n
    gate = asyncio.Semaphore(max(1, concurrency))
    t_start = time.monotonic()

    async def one_rollout(i: int, row: Any, k: int) -> Optional[dict[str, Any]]:
        nonlocal done
        meta = {"job_id": job, "sample_id": f"s{i}", "rollout_id": f"s{i}-r{k}",
                "attempt_id": "a0"}
        inp = RolloutInput(
            messages=row.message_dicts(), tools=row.tool_dicts(), ground_truth=row.ground_truth,
            rollout_extra=row.rollout_extra, sampling_params=sampling_params,
            model_resource={"model_name": model.model, "base_url": model.base_url,
                            "api_key": model.api_key},
            request_metadata=meta, **row.forwarded_fields())
        async with gate:
            out, secs = await _timed(ro_pool, inp)
        result = None
        if ro_track.record(out, secs) and out.agent_output is not None:
            score, is_scored = 0.0, True
            for (ref, pool), track in zip(rewards, rw_tracks, strict=True):
                if ref.func_type is not FunctionType.REWARD:
                    continue
                r_out, r_secs = await _timed(pool, RewardInput(
                    agent_output=out.agent_output, ground_truth=row.ground_truth,
                    request_metadata=meta))
                value = r_out.reward.reward_score
                if not track.record(r_out, r_secs, value):
                    is_scored = False  # a failed reward leaves the rollout unscored
                    break
                score += ref.weight * value
            if not rewards:  # no reward function: the rollout's own score, if it set one
                own = out.agent_output.reward_score
                score, is_scored = (own or 0.0), own is not None
            result = {"agent_output": out.agent_output, "score": score, "scored": is_scored}
        done += 1
        if on_progress:
            on_progress(done, total)
        return result

    async def one_prompt(i: int, row: Any) -> None:
        nonlocal scored, learnable
        results = await asyncio.gather(*(one_rollout(i, row, k) for k in range(n)))
        group = [r for r in results if r is not None]
        scores = [r["score"] for r in group]
        for (ref, pool), track in zip(rewards, rw_tracks, strict=True):
            if ref.func_type is not FunctionType.GROUP_REWARD or not group:
                continue
            g_out, g_secs = await _timed(pool, GroupRewardInput(
                agent_outputs=[r["agent_output"] for r in group], ground_truth=row.ground_truth,
                request_metadata={"job_id": job, "sample_id": f"s{i}", "rollout_id": f"s{i}-g",
                                  "attempt_id": "a0"}))
            values = [x.reward_score for x in g_out.reward.rewards]
            if g_out.status == TaskStatus.SUCCESS and len(values) != len(group):
                g_out.status = TaskStatus.FAILED
                g_out.error = f"returned {len(values)} rewards for {len(group)} rollouts"
            if not track.record(g_out, g_secs):
                return  # the whole group is unscored
            track.scores.extend(values)
            scores = [s + ref.weight * v for s, v in zip(scores, values, strict=True)]
        kept = [s for s, r in zip(scores, group, strict=True) if r["scored"]]
        final.extend(kept)
        if len(kept) >= 2:
            scored += 1
            learnable += int(max(kept) - min(kept) > 1e-9)

    await asyncio.gather(*(one_prompt(i, row) for i, row in enumerate(rows)))
    return HarnessReport(
        prompts=len(rows), rollouts_per_prompt=n, elapsed_s=time.monotonic() - t_start,
        rollout=ro_track.finish(), rewards=[t.finish() for t in rw_tracks],
        final_reward=Distribution.of(final), scored_prompts=scored,
        learnable_prompts=learnable, learnability=(learnable / scored) if scored else None,
    )


async def run_single(input_data: dict[str, Any], *, classpath: Optional[str] = None,
                     func_type: str | FunctionType | None = None, workspace: str | Path = ".",
                     instance_url: Optional[str] = None,
                     timeout: Optional[float] = None) -> Any:
    """Run one input through a classpath (a one-worker pool) or a loaded instance's URL.

    Returns the validated output model (status FAILED with the error on failure).
    """
    from rltune.sdk.data import OUTPUT_MODELS

    ftype = FunctionType(func_type or input_data.get("func_type") or "rollout")
    if instance_url:
        import httpx

        url = instance_url.rstrip("/")
        url = url if url.endswith("/api/v1") else f"{url}/api/v1"
        async with httpx.AsyncClient(timeout=timeout) as client:
            resp = await client.post(url, json=input_data)
        if resp.status_code != 200:
            from rltune.functions.failures import failed_output

            return failed_output(ftype, f"instance answered {resp.status_code}: {resp.text}",
                                 code="bad_request")
        return OUTPUT_MODELS[ftype].model_validate(resp.json())
    assert classpath, "give a classpath or an instance url"
    spec = FunctionComponentSpec(classpath=classpath, func_type=ftype, workspace=workspace,
                                 timeout=timeout, max_retries=0)
    async with await FunctionPool.start(spec) as pool:
        return await pool.call(input_data)
