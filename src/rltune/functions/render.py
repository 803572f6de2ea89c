"""Print function outputs and harness reports as table, JSON or YAML (rich on the terminal)."""

from __future__ import annotations

import io
import json
from typing import Any

from pydantic import BaseModel

FORMATS = ("table", "json", "yaml")


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(data, dict) and data:
        rows: list[tuple[str, str]] = []
        for key, value in data.items():
            rows += _flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(data, list) and data and len(json.dumps(data, default=str)) > 80:
        rows = []
        for i, value in enumerate(data):
            rows += _flatten(value, f"{prefix}[{i}]")
        return rows
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return [(prefix, text)]


def render(data: BaseModel | dict, fmt: str = "table", title: str = "") -> str:
    """The text to print for ``data`` in ``fmt`` (table|json|yaml)."""
    payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    if fmt == "json":
        return json.dumps(payload, indent=2, ensure_ascii=False)
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(payload, sort_keys=False, allow_unicode=True)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None, show_header=True, header_style="bold")
    table.add_column("field", style="cyan", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in _flatten(payload):
        table.add_row(key, value)
    buf = io.StringIO()
    Console(file=buf, width=120, color_system=None).print(table)
    return buf.getvalue()


def render_report(report: Any, fmt: str = "table") -> str:
    """A harness report: a readable summary for ``table``, the full model otherwise."""
    if fmt != "table":
        return render(report, fmt)

    def ms(x: Any) -> str:
        return "-" if x is None else f"{x * 1000:.0f} ms"

    def dist(d: Any) -> str:
        if not d.count:
            return "no scores"
        return (f"n={d.count} mean={d.mean:.3f} std={d.std:.3f} min={d.min:.3g} "
                f"p50={d.p50:.3g} max={d.max:.3g}  values: "
                + ", ".join(f"{k}×{v}" for k, v in d.histogram.items()))

    lines = [f"{report.prompts} prompts × {report.rollouts_per_prompt} rollouts in "
             f"{report.elapsed_s:.1f} s"]
    for label, st in [("rollout", report.rollout)] + [("reward", r) for r in report.rewards]:
        lines.append(f"{label} {st.name}: {st.succeeded} ok, {st.failed} failed, latency p50 "
                     f"{ms(st.latency_p50_s)} p95 {ms(st.latency_p95_s)}")
        if label == "reward":
            lines.append(f"  scores: {dist(st.scores)}")
        for err in st.first_errors:
            lines.append(f"  error: {err[:300]}")
    lines.append(f"final reward: {dist(report.final_reward)}")
    if report.learnability is None:
        lines.append("learnability: n/a (no prompt has 2 or more scored rollouts)")
    else:
        lines.append(f"learnability: {report.learnability:.0%} ({report.learnable_prompts} of "
                     f"{report.scored_prompts} prompts have rewards that vary; RL learns "
                     f"nothing from the others)")
    return "\n".join(lines)
