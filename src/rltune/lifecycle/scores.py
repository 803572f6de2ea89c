"""Evaluation scores: mean@1 and pass@k from n sampled rewards per prompt, side by side.

Example:
    >>> round(pass_at_k(n=4, c=1, k=2), 4)      # 1 - C(3,2)/C(4,2)
    0.5
    >>> prompt_scores([1.0, 0.0, 0.0, 0.0], k=2, threshold=1.0)["pass@k"]
    0.5
"""

from __future__ import annotations

from math import comb
from typing import Any, Optional


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k samples passes) from c passes in n."""
    if n <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def prompt_scores(rewards: list[Optional[float]], k: int, threshold: float) -> dict[str, Any]:
    """A failed sample (None) counts as reward 0 and as not passing."""
    values = [0.0 if r is None else float(r) for r in rewards]
    passed = sum(1 for r in rewards if r is not None and r >= threshold)
    return {"rewards": values, "mean@1": sum(values) / len(values) if values else 0.0,
            "pass@k": pass_at_k(len(values), passed, k), "passed": passed,
            "failed": sum(1 for r in rewards if r is None)}


def model_totals(per_prompt: list[dict[str, Any]]) -> dict[str, float]:
    """Means over prompts (each prompt weighs the same)."""
    n = len(per_prompt) or 1
    return {"mean@1": sum(p["mean@1"] for p in per_prompt) / n,
            "pass@k": sum(p["pass@k"] for p in per_prompt) / n,
            "failed": float(sum(p["failed"] for p in per_prompt))}


def side_by_side(results: list[dict[str, Any]], prompts: list[str]) -> list[dict[str, Any]]:
    """One row per prompt: ``{row_index, prompt, models: {label: {mean@1, pass@k}}}``."""
    rows = []
    for i, prompt in enumerate(prompts):
        rows.append({"row_index": i, "prompt": prompt, "models": {
            r["model"]: {k: r["per_prompt"][i][k] for k in ("mean@1", "pass@k", "rewards")}
            for r in results}})
    return rows
