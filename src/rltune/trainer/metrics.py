"""Per-step metrics of the rollouts and rewards, named as verl and the cloud name them
(docs/metrics.md).

Example:
    >>> from rltune.rollout.results import RolloutResult
    >>> a = RolloutResult("r1", "s", 0, 0, ok=True, score=1.0, reward=1.0, num_calls=2)
    >>> b = RolloutResult("r2", "s", 0, 0, ok=False, error="boom")
    >>> m = rollout_metrics([a, b])
    >>> m["trace/success_rate/agent"], m["critic/rewards/mean"], m["trace/num_llm_calls/mean"]
    (0.5, 1.0, 2.0)
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from rltune.rollout.results import RolloutResult, by_prompt, final_reward, has_signal


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def _stats(prefix: str, values: Sequence[float], out: dict[str, float]) -> None:
    if not values:
        return
    out[f"{prefix}/mean"] = _mean(values)
    out[f"{prefix}/max"] = float(max(values))
    out[f"{prefix}/min"] = float(min(values))


def rollout_metrics(results: Sequence[RolloutResult], *, scored: bool = True) -> dict[str, float]:
    """Metrics over every rollout of a step: ``critic/rewards`` are the shaped rewards,
    ``critic/score`` the raw scores of the reward functions. ``scored=False`` (nothing was
    scored: OPD without reward functions) leaves out the rates that would read as failures."""
    out: dict[str, float] = {}
    ok = [r for r in results if r.ok]
    usable = [r for r in ok if r.usable]
    out["trace/success_rate/agent"] = len(ok) / len(results) if results else 0.0
    out["trace/success_rate/reward"] = len(usable) / len(ok) if ok else 0.0
    out["train/dropped_rollouts"] = float(len(results) - len(usable))
    out["train/discarded_groups"] = float(len({r.sample_index for r in results if r.discarded}))
    out["trace/attempts/agent/mean"] = _mean([r.attempts for r in results])
    _stats("critic/rewards", [final_reward(r) for r in usable], out)
    spreads = [statistics.stdev(final_reward(r) for r in g) for g in by_prompt(usable)
               if len(g) > 1]
    if spreads:  # TRL's reward_std: the mean over prompts of their rollouts' std
        out["critic/rewards/group_std"] = _mean(spreads)
    if usable:
        out["critic/score/mean"] = _mean([float(r.score) for r in usable])  # type: ignore[arg-type]
    lengths = [r.response_tokens for r in ok]
    _stats("trajectory/response_length", lengths, out)
    if ok:
        clipped = [any(f == "length" for seq in r.sequences for f in seq.finish_reasons)
                   for r in ok]
        out["trajectory/response_length/clip_ratio"] = _mean([float(c) for c in clipped])
        out["trajectory/num_turns/mean"] = _mean([_turns(r) for r in ok])
        out["trace/num_llm_calls/mean"] = _mean([r.num_calls for r in ok])
        out["trajectory/template_rewrites"] = float(sum(r.template_rewrites for r in ok))
        out["timing/s/rollout/agent_loop_latency/avg"] = _mean([r.latency_s for r in ok])
        out["timing/s/rollout/model_latency/avg"] = _mean([r.model_latency_s for r in ok])
    if usable:
        out["timing/s/rollout/reward_latency/avg"] = _mean([r.reward_latency_s for r in usable])
    per_fn: dict[str, list[float]] = defaultdict(list)
    per_metric: dict[str, list[float]] = defaultdict(list)
    per_rollout_metric: dict[str, list[float]] = defaultdict(list)
    for r in usable:
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
    out["train/frac_reward_zero_std"] = frac_zero_std(usable)
    if not scored:
        del out["trace/success_rate/reward"], out["train/frac_reward_zero_std"]
    return out


def _turns(r: RolloutResult) -> float:
    messages = r.agent_output.messages if r.agent_output and r.agent_output.messages else []
    return float(sum(1 for m in messages if m.get("role") == "assistant")) or float(r.num_calls)


def frac_zero_std(scored: Sequence[RolloutResult]) -> float:
    """Fraction of prompts whose scored rollouts carry no RL signal (``has_signal``)."""
    groups = by_prompt(scored)
    return sum(not has_signal(g) for g in groups) / len(groups) if groups else 0.0


#: Volcano Ark's console names of our metrics, logged next to ours (``ark_aliases``).
ARK_ALIASES = {"critic/rewards/mean": "train/reward->final_reward.mean",
               "validation/data/reward/mean@1": "test/reward->final_reward.mean"}
#: The other clouds' (verl's) names of our metrics, logged next to ours too.
CLOUD_ALIASES = {**ARK_ALIASES, "timing/s/sync": "timing/s/param_sync"}


def ark_aliases(metrics: dict[str, float]) -> dict[str, float]:
    """The clouds' names (:data:`CLOUD_ALIASES`: Ark's console, verl's ``param_sync``) for
    the metrics of ``metrics`` that they show.

    Example:
        >>> ark_aliases({"critic/rewards/mean": 0.5, "actor/pg_loss": 1.0, "timing/s/sync": 2})
        {'train/reward->final_reward.mean': 0.5, 'timing/s/param_sync': 2}
    """
    return {cloud: metrics[ours] for ours, cloud in CLOUD_ALIASES.items() if ours in metrics}
