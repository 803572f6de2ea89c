"""The advisor: runs every enabled detector after each step and writes each new alert once.

A code fires once when its detector starts finding evidence; while the evidence persists it is
not repeated, and it fires again only after a step without it. A replayed step (resume) that
already has alerts keeps them. ``rollout_features`` derives what the detectors need from the
step's trajectory records (``doctor/…`` keys): rollouts, dropped share, errors, identical
groups.

Example:
    >>> import tempfile
    >>> from rltune.config.advisor import AdvisorConfig
    >>> adv = Advisor(AdvisorConfig(thresholds={"P9": {"window": 1}}), tempfile.mkdtemp())
    >>> [a.code for a in adv.observe(1, {"trajectory/response_length/clip_ratio": 1.0})]
    ['P9']
    >>> adv.observe(2, {"trajectory/response_length/clip_ratio": 1.0})
    []
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from rltune.config.advisor import AdvisorConfig
from rltune.doctor.alerts import Alert, append_alert, read_alerts
from rltune.doctor.detectors import DETECTORS, Steps

_OOM = re.compile(r"out of memory|outofmemory|MemoryError|Cannot allocate memory", re.I)


def rollout_features(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``doctor/…`` metrics of one step from its trajectory records (``trajectory_record``)."""
    records = list(records)
    if not records:
        return {}
    failed = [r for r in records if r.get("status") != "success"]
    errors = Counter(_error_key(r.get("error")) for r in failed if r.get("error"))
    groups: dict[Any, list[str]] = defaultdict(list)
    rewards: dict[Any, list[float]] = defaultdict(list)
    for r in records:
        if r.get("status") == "success":
            groups[r.get("sample_index")].append(_final_answer(r))
            if isinstance(r.get("reward"), (int, float)):
                rewards[r.get("sample_index")].append(float(r["reward"]))
    sized = [g for g in groups.values() if len(g) >= 2]
    same = sum(1 for g in sized if len(set(g)) == 1)
    return {
        "doctor/rollouts": float(len(records)),
        "doctor/dropped_share": len(failed) / len(records),
        "doctor/errors": dict(errors),
        "doctor/oom_errors": float(sum(k for e, k in errors.items() if _OOM.search(e))),
        **({"doctor/identical_group_share": same / len(sized)} if sized else {}),
        **_reward_se([sum(v) / len(v) for v in rewards.values() if v]),
    }


def _reward_se(group_means: list[float]) -> dict[str, float]:
    """``doctor/reward_se``: the standard error of the step's mean reward over its prompts
    (the spread of the prompts' group means / sqrt(prompts)); what P2 compares swings to."""
    if len(group_means) < 2:
        return {}
    return {"doctor/reward_se": statistics.stdev(group_means) / len(group_means) ** 0.5}


def _error_key(error: Any) -> str:
    """The error's first line without numbers (so the same failure counts as one)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else "error"
    return re.sub(r"\d+(\.\d+)?", "N", text)[:200]


def _final_answer(record: dict[str, Any]) -> str:
    for m in reversed(record.get("messages") or []):
        if m.get("role") == "assistant":
            return str(m.get("content") or "").strip()
    return ""


class Advisor:
    """Watches one job's steps; ``observe`` returns (and writes) the step's new alerts."""

    def __init__(self, config: AdvisorConfig, job_dir: str | Path,
                 history: Optional[Steps] = None):
        self.config = config
        self.job_dir = Path(job_dir)
        self.steps: Steps = list(history or [])
        self.active: set[str] = set()
        self.written = {(a.step, a.code) for a in read_alerts(self.job_dir)}
        self.codes = [c for c in DETECTORS if config.enabled and c not in config.off]

    def observe(self, step: int, metrics: dict[str, Any],
                records: Optional[Iterable[dict[str, Any]]] = None) -> list[Alert]:
        row = {**metrics, **(rollout_features(records) if records is not None else {}),
               "step": step}
        self.steps = [s for s in self.steps if s.get("step", 0) < step] + [row]
        new = []
        for alert in self.evaluate(step):
            if (alert.step, alert.code) not in self.written:
                append_alert(self.job_dir, alert)
                self.written.add((alert.step, alert.code))
            new.append(alert)
        return new

    def evaluate(self, step: int) -> list[Alert]:
        """The alerts that start at ``step`` (codes that found evidence now but not before)."""
        out = []
        for code in self.codes:
            det = DETECTORS[code]
            evidence = det.fn(self.steps, self.config.thresholds_for(code))
            if evidence is None:
                self.active.discard(code)
                continue
            if code in self.active:
                continue
            self.active.add(code)
            out.append(Alert(step=step, code=code, title=det.title, evidence=evidence,
                             advice=det.advice))
        return out


def diagnose(steps: Steps, config: Optional[AdvisorConfig] = None) -> list[Alert]:
    """Replay a finished job's metrics through the detectors (no file is written)."""
    adv = Advisor(config or AdvisorConfig(), job_dir="/nonexistent-doctor-dir")
    out: list[Alert] = []
    for row in steps:
        step = int(row.get("step", 0))
        if step == 0:
            continue
        adv.steps = [s for s in adv.steps if s.get("step", 0) < step] + [row]
        out.extend(adv.evaluate(step))
    return out
