"""Other tools' names for rltune's metrics, for ``observability.metric_names``: a tracker then
gets each metric under rltune's name and under each listed vocabulary's (``trl``: TRL's
``GRPOTrainer``, ``verl``: verl's trainer), so a dashboard built for that tool reads the run.
``metrics.jsonl`` keeps rltune's names only. A metric rltune does not log has no alias.

Example:
    >>> aliases({"critic/rewards/mean": 0.5, "trace/reward/exact/mean": 1.0}, ["trl"])
    {'reward': 0.5, 'rewards/exact/mean': 1.0}
    >>> aliases({"validation/data/reward/mean@1": 0.4}, ["verl"])
    {'val-core/data/reward/mean@1': 0.4}
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rltune.names import METRIC_VOCABULARIES, check_registry

#: TRL's ``GRPOTrainer`` names (its ``log`` keys), by rltune name.
TRL = {
    "critic/rewards/mean": "reward",
    "critic/rewards/group_std": "reward_std",
    "train/frac_reward_zero_std": "frac_reward_zero_std",
    "trajectory/response_length/mean": "completions/mean_length",
    "trajectory/response_length/min": "completions/min_length",
    "trajectory/response_length/max": "completions/max_length",
    "trajectory/response_length/clip_ratio": "completions/clipped_ratio",
    "actor/kl_loss": "kl",
    "actor/entropy": "entropy",
    "actor/pg_clipfrac": "clip_ratio/region_mean",
    "actor/pg_loss": "loss",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "learning_rate",
}
#: verl's trainer names where they differ from rltune's (``actor/*``, ``critic/rewards/*``,
#: ``perf/throughput`` are verl's names already).
VERL = {
    "trajectory/response_length/mean": "response_length/mean",
    "trajectory/response_length/max": "response_length/max",
    "trajectory/response_length/min": "response_length/min",
    "trajectory/response_length/clip_ratio": "response_length/clip_ratio",
    "timing/s/step": "timing_s/step",
    "timing/s/rollout": "timing_s/gen",
    "timing/s/update": "timing_s/update_actor",
    "timing/s/validation": "timing_s/testing",
    "validation/data/reward/mean@1": "val-core/data/reward/mean@1",
}
#: Names with a part that varies (a reward function's name): (rltune pattern, alias template).
_PATTERNS = {"trl": [(re.compile(r"^trace/reward/([^/]+)/mean$"), r"rewards/\1/mean")],
             "verl": []}
_TABLES = {"trl": TRL, "verl": VERL}
check_registry("metric vocabulary", METRIC_VOCABULARIES[1:], _TABLES)


def aliases(metrics: dict[str, float], vocabularies: Iterable[str]) -> dict[str, float]:
    """Each metric of ``metrics`` under the names of ``vocabularies`` (rltune's not repeated)."""
    out: dict[str, float] = {}
    for vocab in vocabularies:
        if vocab == "rltune":
            continue
        table = _TABLES[vocab]
        for name, value in metrics.items():
            alias = table.get(name)
            if alias is None:
                alias = next((p.sub(t, name) for p, t in _PATTERNS[vocab] if p.match(name)),
                             None)
            if alias is not None and alias not in metrics:
                out[alias] = value
    return out


def markdown_table() -> str:
    """The docs table of both vocabularies (``docs/metrics.md``; a test keeps them equal)."""
    names = list(dict.fromkeys([*TRL, *VERL, "trace/reward/<fn>/mean"]))
    extra = {"trl": {"trace/reward/<fn>/mean": "rewards/<fn>/mean"}, "verl": {}}
    lines = ["| rltune | `trl` | `verl` |", "|---|---|---|"]
    for name in names:
        cells = [_TABLES[v].get(name) or extra[v].get(name) for v in ("trl", "verl")]
        lines.append(f"| `{name}` | " + " | ".join(f"`{c}`" if c else "" for c in cells) + " |")
    return "\n".join(lines) + "\n"
