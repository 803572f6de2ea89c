"""The doctor's detectors: pure functions over the job's step metrics, oldest first.

Each step is a dict of the metrics the trainer logs (``critic/rewards/mean``, ``actor/ppo_kl``,
``trajectory/response_length/clip_ratio``, …) with its ``step``, plus what the advisor derives
from the step's rollouts (``doctor/…``, see ``advisor.rollout_features``). A detector takes the
steps and its thresholds (``config/advisor.py``; docs/doctor.md) and returns the evidence (a
dict of the values that triggered it) or None. Steps without a detector's metric are skipped,
so a detector stays silent on a job that does not log it.

Example:
    >>> steps = [{"step": i, "trajectory/response_length/clip_ratio": 0.9} for i in (1, 2, 3)]
    >>> DETECTORS["P9"].fn(steps, {"window": 3, "clip_ratio": 0.5})["clip_ratio"]
    0.9
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

Steps = list[dict[str, Any]]
Evidence = Optional[dict[str, Any]]

REWARD = "critic/rewards/mean"
REWARD_MAX = "critic/rewards/max"
VAL = "validation/data/reward/mean@1"
KL = "actor/kl_loss"
PPO_KL = "actor/ppo_kl"
GRAD = "actor/grad_norm"
ENTROPY = "actor/entropy"
LENGTH = "trajectory/response_length/mean"
CLIP = "trajectory/response_length/clip_ratio"
COMPONENT = "trace/reward/"
REWARD_SE = "doctor/reward_se"
IDENTICAL = "doctor/identical_group_share"


def series(steps: Steps, key: str) -> list[tuple[int, float]]:
    """(step, value) of every step that logged a finite ``key``."""
    out = []
    for s in steps:
        v = s.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out.append((int(s.get("step", 0)), float(v)))
    return out


def _last(steps: Steps, key: str, n: int) -> list[tuple[int, float]]:
    return series(steps, key)[-max(1, int(n)):]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _r(x: float) -> float:
    return round(float(x), 6)


def _mean_over(steps: Steps, key: str, th: dict[str, float], limit: str, name: str) -> Evidence:
    """Evidence when the mean of ``key`` over the last ``window`` steps is >= ``th[limit]``."""
    pts = _last(steps, key, int(th["window"]))
    if len(pts) < int(th["window"]):
        return None
    mean = _mean([v for _, v in pts])
    return {"steps": _window(pts), name: _r(mean)} if mean >= th[limit] else None


def _solved(steps: Steps, th: dict[str, float]) -> bool:
    """The policy has converged rather than collapsed: over the last ``window`` steps the mean
    reward is ``solved_share`` or more of the mean best reward of a rollout
    (``critic/rewards/max``), so low entropy or groups that agree are the right answer given
    confidently. False when either series is missing."""
    n = int(th["window"])
    mean, best = _last(steps, REWARD, n), _last(steps, REWARD_MAX, n)
    if len(mean) < n or len(best) < n:
        return False
    top = _mean([v for _, v in best])
    return top > 0 and _mean([v for _, v in mean]) >= th["solved_share"] * top


def _window(points: list[tuple[int, float]]) -> list[int]:
    return [points[0][0], points[-1][0]]


def _corr(xs: list[float], ys: list[float]) -> float:
    mx, my = _mean(xs), _mean(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx < 1e-12 or sy < 1e-12:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / (sx * sy)


# ---------------------------------------------------------------- the seed table (P1-P9)

def no_convergence(steps: Steps, th: dict[str, float]) -> Evidence:
    """P1: the reward is flat over ``window`` steps while ``actor/ppo_kl`` ≈ 0 and
    ``actor/grad_norm`` is tiny (the policy barely moves)."""
    n = int(th["window"])
    rewards, kls, grads = _last(steps, REWARD, n), _last(steps, PPO_KL, n), _last(steps, GRAD, n)
    if len(rewards) < n or len(kls) < n or len(grads) < n:
        return None
    values = [v for _, v in rewards]
    spread = max(values) - min(values)
    kl = _mean([abs(v) for _, v in kls])
    grad = _mean([v for _, v in grads])
    if spread <= th["reward_range"] and kl <= th["ppo_kl"] and grad <= th["grad_norm"]:
        return {"steps": _window(rewards), "reward_range": _r(spread), "ppo_kl": _r(kl),
                "grad_norm": _r(grad)}
    return None


def oscillation(steps: Steps, th: dict[str, float]) -> Evidence:
    """P2: the reward swings up and down by ``amplitude`` or more, changing direction in at
    least ``flip_share`` of the consecutive steps of the window, and by ``noise`` times what
    the batches' own sampling noise would swing (when the steps log ``doctor/reward_se``)."""
    pts = _last(steps, REWARD, int(th["window"]))
    if len(pts) < max(4, int(th["window"])):
        return None
    diffs = [b[1] - a[1] for a, b in itertools.pairwise(pts)]
    flips = sum(1 for a, b in itertools.pairwise(diffs) if a * b < 0) / max(1, len(diffs) - 1)
    amp = _mean([abs(d) for d in diffs])
    if flips < th["flip_share"] or amp < th["amplitude"]:
        return None
    evidence = {"steps": _window(pts), "mean_swing": _r(amp), "flip_share": _r(flips)}
    first = pts[0][0]
    ses = [v for step, v in series(steps, REWARD_SE) if step >= first]
    if ses:
        # Two independent batch means with standard error se differ by 2 se / sqrt(pi) on
        # average: a batch of a few prompts of mixed difficulty swings that much by itself.
        chance = 2 / math.sqrt(math.pi) * _mean(ses)
        if amp < th["noise"] * chance:
            return None
        evidence["chance_swing"] = _r(chance)
    return evidence


def kl_explosion(steps: Steps, th: dict[str, float]) -> Evidence:
    """P3: the KL to the reference (``actor/kl_loss``, logged when ``kl_loss_coef`` > 0 on the
    steps that updated) is above ``kl`` for ``window`` logged steps, or above ``spike`` once."""
    pts = series(steps, KL)
    n = int(th["window"])
    if not pts:
        return None
    recent = pts[-n:]
    values = [abs(v) for _, v in recent]
    if (len(pts) >= n and min(values) >= th["kl"]) or values[-1] >= th["spike"]:
        return {"steps": _window(recent), "kl": _r(values[-1]), "first_kl": _r(abs(pts[0][1]))}
    return None


def kl_zero(steps: Steps, th: dict[str, float]) -> Evidence:
    """KL ≈ 0, not learning: the KL to the reference stays below ``kl`` and the reward is flat
    over ``window`` steps (the KL term holds the policy in place)."""
    n = int(th["window"])
    kls, rewards = _last(steps, KL, n), _last(steps, REWARD, n)
    if len(kls) < n or len(rewards) < n:
        return None
    kl = max(abs(v) for _, v in kls)
    values = [v for _, v in rewards]
    if kl <= th["kl"] and max(values) - min(values) <= th["reward_range"]:
        return {"steps": _window(rewards), "kl": _r(kl), "reward_range": _r(max(values) -
                                                                            min(values))}
    return None


def entropy_collapse(steps: Steps, th: dict[str, float]) -> Evidence:
    """P4: ``actor/entropy`` is below ``entropy`` for ``window`` steps, or fell by ``drop`` (a
    share) from its first value, while the task is not solved (see ``_solved``) and, when the
    steps log ``doctor/identical_group_share``, ``agree`` or more of the groups give one
    final answer on average: groups whose samples still differ are still exploring."""
    pts = series(steps, ENTROPY)
    n = int(th["window"])
    if len(pts) < n or _solved(steps, th):
        return None
    recent = [v for _, v in pts[-n:]]
    first = pts[0][1]
    fell = first > 0 and max(recent) <= (1 - th["drop"]) * first
    if not (max(recent) <= th["entropy"] or fell):
        return None
    evidence = {"steps": _window(pts[-n:]), "entropy": _r(recent[-1]), "first_entropy": _r(first)}
    agreeing = [v for step, v in series(steps, IDENTICAL) if step >= pts[-n][0]]
    if agreeing:
        # A tool-calling answer is mostly fixed syntax, so its mean entropy per token is
        # low even while the samples of a prompt still disagree where it matters.
        if _mean(agreeing) < th["agree"]:
            return None
        evidence["identical_group_share"] = _r(_mean(agreeing))
    return evidence


def slow_rollouts(steps: Steps, th: dict[str, float]) -> Evidence:
    """Slow rollouts: steps of at least ``min_step_s`` seconds spend ``rollout_share`` or more
    of their time sampling (``timing/s/rollout`` / ``timing/s/step``)."""
    n = int(th["window"])
    total, roll = _last(steps, "timing/s/step", n), _last(steps, "timing/s/rollout", n)
    if len(total) < n or len(roll) < n:
        return None
    step_s = _mean([v for _, v in total])
    share = _mean([v for _, v in roll]) / max(step_s, 1e-9)
    if step_s >= th["min_step_s"] and share >= th["rollout_share"]:
        return {"steps": _window(total), "step_s": _r(step_s), "rollout_share": _r(share)}
    return None


def out_of_memory(steps: Steps, th: dict[str, float]) -> Evidence:
    """OOM: rollouts or updates failed with an out-of-memory error (``doctor/oom_errors``)."""
    pts = [(s, v) for s, v in series(steps, "doctor/oom_errors") if v >= th["errors"]]
    if pts:
        return {"steps": [pts[-1][0], pts[-1][0]], "oom_errors": int(pts[-1][1])}
    return None


def overfitting(steps: Steps, th: dict[str, float]) -> Evidence:
    """P6: the validation reward fell by ``val_drop`` from its best while the training reward
    rose by ``train_rise`` over the same steps (mean of ``window`` steps at each end)."""
    vals = series(steps, VAL)
    if len(vals) < 2:
        return None
    best_step, best = max(vals, key=lambda p: (p[1], -p[0]))
    last_step, last = vals[-1]
    if last_step <= best_step or best - last < th["val_drop"]:
        return None
    train = series(steps, REWARD)
    n = int(th["window"])
    if not train:
        return None
    # the training reward then: around the best validation (the first step when that was the
    # validation before training)
    before = [v for s, v in train if s <= max(best_step, train[0][0])][-n:]
    after = [v for s, v in train if s <= last_step][-n:]
    if not before or not after or _mean(after) - _mean(before) < th["train_rise"]:
        return None
    return {"steps": [best_step, last_step], "validation_best": _r(best),
            "validation_now": _r(last), "train_then": _r(_mean(before)),
            "train_now": _r(_mean(after))}


def truncation(steps: Steps, th: dict[str, float]) -> Evidence:
    """P9: ``trajectory/response_length/clip_ratio`` (the share of rollouts cut at
    ``max_length``) is at least ``clip_ratio`` in each of ``window`` steps running (one long
    batch is not a truncation problem; the evidence is the window's mean)."""
    pts = _last(steps, CLIP, int(th["window"]))
    if len(pts) < int(th["window"]) or min(v for _, v in pts) < th["clip_ratio"]:
        return None
    return {"steps": _window(pts), "clip_ratio": _r(_mean([v for _, v in pts]))}


# ---------------------------------------------------------------- reward hacking

def length_hacking(steps: Steps, th: dict[str, float]) -> Evidence:
    """hack/length: over ``window`` steps after the first ``warmup`` ones the response length
    grows by ``length_growth`` (a share) together with the reward (correlation ≥
    ``correlation``, rise ≥ ``reward_rise``). The first steps are left out: a policy that
    learns its task (to call a tool, to show its work) lengthens its answers as it gets them
    right."""
    n = int(th["window"])
    steps = [s for s in steps if s.get("step", 0) > th["warmup"]]
    lengths = dict(_last(steps, LENGTH, n))
    rewards = dict(_last(steps, REWARD, n))
    common = sorted(set(lengths) & set(rewards))
    if len(common) < n:
        return None
    ls, rs = [lengths[s] for s in common], [rewards[s] for s in common]
    half = max(1, n // 2)
    growth = (_mean(ls[-half:]) - _mean(ls[:half])) / max(_mean(ls[:half]), 1e-9)
    rise = _mean(rs[-half:]) - _mean(rs[:half])
    corr = _corr(ls, rs)
    if corr >= th["correlation"] and growth >= th["length_growth"] and rise >= th["reward_rise"]:
        return {"steps": [common[0], common[-1]], "length_from": _r(_mean(ls[:half])),
                "length_to": _r(_mean(ls[-half:])), "reward_rise": _r(rise),
                "correlation": _r(corr)}
    return None


def divergence(steps: Steps, th: dict[str, float]) -> Evidence:
    """hack/divergence: the training reward rises (``train_rise``) while the validation reward
    does not, until the training reward exceeds validation by ``gap``."""
    vals = series(steps, VAL)
    train = series(steps, REWARD)
    n = int(th["window"])
    if len(vals) < 2 or len(train) < 2 * n:
        return None
    first_val, last_val = vals[0][1], vals[-1][1]
    t0, t1 = _mean([v for _, v in train[:n]]), _mean([v for _, v in train[-n:]])
    if t1 - t0 >= th["train_rise"] and last_val <= first_val and t1 - last_val >= th["gap"]:
        return {"steps": [train[0][0], train[-1][0]], "train_from": _r(t0), "train_to": _r(t1),
                "validation_from": _r(first_val), "validation_to": _r(last_val)}
    return None


def _components(steps: Steps, n: int) -> dict[str, float]:
    keys = {k for s in steps[-n:] for k in s if k.startswith(COMPONENT) and k.endswith("/mean")}
    return {k[len(COMPONENT):-len("/mean")]: _mean([v for _, v in _last(steps, k, n)])
            for k in keys}


def component_dominance(steps: Steps, th: dict[str, float]) -> Evidence:
    """hack/component: with two or more reward functions, one carries ``share`` or more of the
    reward (its share of the sum of |component means| over ``window`` steps)."""
    comps = _components(steps, int(th["window"]))
    total = sum(abs(v) for v in comps.values())
    if len(comps) < 2 or total < 1e-9 or len(steps) < int(th["window"]):
        return None
    name, value = max(comps.items(), key=lambda kv: abs(kv[1]))
    if abs(value) / total >= th["share"]:
        return {"steps": [steps[-int(th["window"])].get("step", 0), steps[-1].get("step", 0)],
                "component": name, "share": _r(abs(value) / total),
                "components": {k: _r(v) for k, v in sorted(comps.items())}}
    return None


def format_dominance(steps: Steps, th: dict[str, float]) -> Evidence:
    """hack/format: a reward function (or reward metric) named like ``format`` gives ``share``
    or more of the reward (the policy is paid for the shape, not the answer)."""
    n = int(th["window"])
    if len(steps) < n:
        return None
    comps = _components(steps, n)
    fmt = {k: v for k, v in comps.items() if "format" in k.lower()}
    total = sum(abs(v) for v in comps.values())
    if len(comps) < 2 or not fmt or total < 1e-9:
        return None
    share = sum(abs(v) for v in fmt.values()) / total
    if share >= th["share"]:
        return {"steps": [steps[-n].get("step", 0), steps[-1].get("step", 0)],
                "format_share": _r(share), "components": {k: _r(v) for k, v in comps.items()}}
    return None


def mode_collapse(steps: Steps, th: dict[str, float]) -> Evidence:
    """hack/mode-collapse: in ``identical_share`` or more of the groups every rollout gave the
    same final answer (``doctor/identical_group_share``), over ``window`` steps, while the task
    is not solved (see ``_solved``)."""
    if _solved(steps, th):
        return None
    return _mean_over(steps, IDENTICAL, th, "identical_share", "identical_group_share")


# ---------------------------------------------------------------- pipeline health

def dropped_rollouts(steps: Steps, th: dict[str, float]) -> Evidence:
    """pipeline/dropped: ``share`` or more of the rollouts failed or were dropped (not
    trained on) over ``window`` steps (``doctor/dropped_share``)."""
    return _mean_over(steps, "doctor/dropped_share", th, "share", "dropped_share")


def dominant_error(steps: Steps, th: dict[str, float]) -> Evidence:
    """pipeline/error: one error message accounts for ``share`` or more of at least
    ``min_failures`` failed rollouts over ``window`` steps."""
    recent = steps[-int(th["window"]):]
    counts: dict[str, float] = {}
    for s in recent:
        for msg, k in (s.get("doctor/errors") or {}).items():
            counts[msg] = counts.get(msg, 0) + k
    total = sum(counts.values())
    if total < th["min_failures"]:
        return None
    msg, k = max(counts.items(), key=lambda kv: kv[1])
    if k / total >= th["share"]:
        return {"steps": [recent[0].get("step", 0), recent[-1].get("step", 0)], "error": msg,
                "count": int(k), "failures": int(total)}
    return None


def template_rewrites(steps: Steps, th: dict[str, float]) -> Evidence:
    """pipeline/template-rewrites: the gateway rewrote the chat template for ``per_rollout``
    or more rollouts on average (``trajectory/template_rewrites`` / rollouts)."""
    n = int(th["window"])
    rew, roll = _last(steps, "trajectory/template_rewrites", n), _last(steps, "doctor/rollouts", n)
    if len(rew) < n or len(roll) < n:
        return None
    rate = sum(v for _, v in rew) / max(1.0, sum(v for _, v in roll))
    if rate >= th["per_rollout"]:
        return {"steps": _window(rew), "rewrites_per_rollout": _r(rate)}
    return None


def staleness(steps: Steps, th: dict[str, float]) -> Evidence:
    """pipeline/staleness: with ``max_staleness`` on, the share of rollouts dropped as too old
    (``fully_async/dropped_stale_rollouts`` / rollouts) reaches ``dropped_share``, or the mean
    staleness grows every step of the window."""
    n = int(th["window"])
    drop, roll = _last(steps, "fully_async/dropped_stale_rollouts", n), _last(
        steps, "doctor/rollouts", n)
    if len(drop) >= n and len(roll) >= n:
        share = sum(v for _, v in drop) / max(1.0, sum(v for _, v in roll) + sum(
            v for _, v in drop))
        if share >= th["dropped_share"]:
            return {"steps": _window(drop), "dropped_stale_share": _r(share)}
    ages = _last(steps, "fully_async/staleness/mean", n)
    if len(ages) >= n and all(b[1] > a[1] for a, b in itertools.pairwise(ages)):
        return {"steps": _window(ages), "staleness_from": _r(ages[0][1]),
                "staleness_to": _r(ages[-1][1])}
    return None


def functions_at_capacity(steps: Steps, th: dict[str, float]) -> Evidence:
    """pipeline/capacity: rollouts needed ``attempts`` tries on average over ``window`` steps
    (``trace/attempts/agent/mean``: the function workers refused or timed out)."""
    return _mean_over(steps, "trace/attempts/agent/mean", th, "attempts", "attempts_mean")


@dataclass(frozen=True)
class Detector:
    code: str
    title: str
    fn: Callable[[Steps, dict[str, float]], Evidence]
    advice: str  # the seed table's first adjustment with its magnitude, then the fallback


DETECTORS: dict[str, Detector] = {d.code: d for d in (
    Detector("P1", "no convergence: the reward plateaus and the policy barely moves",
             no_convergence, "learning_rate x1.5-2; fallback: check the reward function "
             "(does it ever vary?) and the data"),
    Detector("P2", "oscillation: the reward swings up and down", oscillation,
             "learning_rate x0.5 and batch_size x2; fallback: n_rollouts up"),
    Detector("P3", "KL explosion: the policy runs away from the reference", kl_explosion,
             "kl_loss_coef x5-10; fallback: lower learning_rate"),
    Detector("kl-zero", "KL ≈ 0 and not learning", kl_zero,
             "kl_loss_coef x0.1; fallback: switch to algorithm dapo"),
    Detector("P4", "entropy collapse: the policy stopped exploring", entropy_collapse,
             "switch to algorithm dapo (clip-higher); fallback: n_rollouts up"),
    Detector("slow-rollouts", "slow rollouts: the step waits on sampling", slow_rollouts,
             "n_rollouts down or a tighter max_length; fallback: more function concurrency"),
    Detector("OOM", "out of memory", out_of_memory,
             "ppo_mini_batch_size x0.5; fallback: max_length down or change the parallelism"),
    Detector("P6", "over-fitting: training reward up, validation down", overfitting,
             "n_epochs -1 to -2; fallback: save_strategy steps and keep the best checkpoint "
             "(early stop)"),
    Detector("P9", "high truncation rate: responses are cut at max_length", truncation,
             "max_length +2048 (or as the model's context allows); fallback: check "
             "max_prompt_length"),
    Detector("hack/length", "reward hacking: the response length grows with the reward",
             length_hacking, "check that the reward does not pay for length (normalise or "
             "cap it); fallback: lower max_length"),
    Detector("hack/divergence", "reward hacking: training reward up, validation down",
             divergence, "read the top-rewarded trajectories: the reward likely has a "
             "loophole; fallback: n_epochs down, keep the best checkpoint"),
    Detector("hack/component", "one reward function carries the whole reward",
             component_dominance, "rebalance the reward weights (reward_weight) or fix the "
             "saturated function; fallback: train on that function alone to confirm"),
    Detector("hack/format", "the reward is mostly format", format_dominance,
             "lower the format reward's weight (format should gate, not pay); fallback: "
             "make format a multiplier on correctness"),
    Detector("hack/mode-collapse", "mode collapse: every rollout of a group answers the same",
             mode_collapse, "switch to algorithm dapo or raise the sampling temperature; "
             "fallback: n_rollouts up"),
    Detector("pipeline/dropped", "many rollouts fail or are dropped", dropped_rollouts,
             "read the failed trajectories' errors (rltune doctor shows the dominant one); "
             "fallback: raise the function timeout"),
    Detector("pipeline/error", "one error dominates the failures", dominant_error,
             "fix that error in the rollout or reward function; fallback: run the function "
             "alone with rltune functions test"),
    Detector("pipeline/template-rewrites", "the gateway keeps rewriting the chat template",
             template_rewrites, "send the conversation the way the model's chat template "
             "expects (keep earlier turns unchanged); fallback: set the model's chat template"),
    Detector("pipeline/staleness", "rollouts are growing stale", staleness,
             "set max_staleness 0 (synchronous); fallback: partial_rollouts true"),
    Detector("pipeline/capacity", "function workers at capacity: rollouts are retried",
             functions_at_capacity, "raise the function runtime's concurrency x capacity "
             "(>= batch_size x n_rollouts / s per step x 1.2); fallback: n_rollouts down"),
)}
