"""Per-step metrics of the rollouts and rewards, named as DESIGN.md §8 (verl / Bailian).

Example:
    >>> from rltune.trainer.rollouts import RolloutResult
    >>> a = RolloutResult("r1", "s", 0, 0, ok=True, reward=1.0, num_calls=2)
    >>> b = RolloutResult("r2", "s", 0, 0, ok=False, error="boom")
    >>> m = rollout_metrics([a, b])
    >>> m["trace/success_rate/agent"], m["critic/rewards/mean"], m["trace/num_llm_calls/mean"]
    (0.5, 1.0, 2.0)
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from rltune.trainer.rollouts import RolloutResult


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def _stats(prefix: str, values: Sequence[float], out: dict[str, float]) -> None:
    if not values:
        return
    out[f"{prefix}/mean"] = _mean(values)
    out[f"{prefix}/max"] = float(max(values))
    out[f"{prefix}/min"] = float(min(values))


def rollout_metrics(
    results: Sequence[RolloutResult], raw_scores: dict[str, float] | None = None
) -> dict[str, float]:
    """Metrics over every rollout of a step (``raw_scores``: reward before shaping, by id)."""
    out: dict[str, float] = {}
    ok = [r for r in results if r.ok]
    scored = [r for r in ok if r.scored and r.reward_error is None]
    out["trace/success_rate/agent"] = len(ok) / len(results) if results else 0.0
    out["trace/success_rate/reward"] = len(scored) / len(ok) if ok else 0.0
    out["train/dropped_rollouts"] = float(len(results) - len(scored))
    out["train/discarded_groups"] = float(len({r.sample_index for r in results if r.discarded}))
    out["trace/attempts/agent/mean"] = _mean([r.attempts for r in results])
    _stats("critic/rewards", [r.reward for r in scored], out)
    if scored:
        raw = raw_scores or {}
        out["critic/score/mean"] = _mean([raw.get(r.rollout_id, r.reward) for r in scored])
    lengths = [r.response_tokens for r in ok]
    _stats("trajectory/response_length", lengths, out)
    if ok:
        clipped = [any(f == "length" for row in r.rows for f in row.finish_reasons) for r in ok]
        out["trajectory/response_length/clip_ratio"] = _mean([float(c) for c in clipped])
        out["trajectory/num_turns/mean"] = _mean([_turns(r) for r in ok])
        out["trace/num_llm_calls/mean"] = _mean([r.num_calls for r in ok])
        out["trajectory/template_rewrites"] = float(sum(r.template_rewrites for r in ok))
        out["timing/s/rollout/agent_loop_latency/avg"] = _mean([r.latency_s for r in ok])
    per_fn: dict[str, list[float]] = defaultdict(list)
    per_metric: dict[str, list[float]] = defaultdict(list)
    per_rollout_metric: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        for fn, score in r.component_scores.items():
            per_fn[fn].append(score)
        for fn, metrics in r.component_metrics.items():
            for key, value in metrics.items():
                per_metric[f"{fn}/{key}"].append(value)
    for r in ok:
        for key, value in (
            (r.agent_output.rollout_metrics or {}) if r.agent_output else {}
        ).items():
            per_rollout_metric[key].append(value)
    for fn, values in per_fn.items():
        out[f"trace/reward/{fn}/mean"] = _mean(values)
    for key, values in per_metric.items():
        out[f"trace/reward_metrics/{key}/mean"] = _mean(values)
    for key, values in per_rollout_metric.items():
        out[f"trace/rollout_metrics/{key}/mean"] = _mean(values)
    out["train/frac_reward_zero_std"] = frac_zero_std(scored)
    return out


def _turns(r: RolloutResult) -> float:
    messages = r.agent_output.messages if r.agent_output and r.agent_output.messages else []
    return float(sum(1 for m in messages if m.get("role") == "assistant")) or float(r.num_calls)


def frac_zero_std(scored: Sequence[RolloutResult]) -> float:
    """Fraction of prompts whose scored rollouts all got the same reward (no RL signal)."""
    groups: dict[int, list[float]] = defaultdict(list)
    for r in scored:
        groups[r.sample_index].append(float(r.reward))
    if not groups:
        return 0.0
    flat = [len(v) < 2 or statistics.pstdev(v) < 1e-8 for v in groups.values()]
    return sum(flat) / len(flat)
