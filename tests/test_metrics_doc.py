"""docs/metrics.md lists every metric a job logs: the names the trainer's code declares, and
the names a real tiny job writes to ``metrics.jsonl``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "metrics.md"
GROUPS = "actor|critic|engine|trace|train|training|trajectory|timing|perf|fully_async|validation"
LITERAL = re.compile(rf"""f?["']((?:{GROUPS})/[A-Za-z0-9_/@{{}}.]*)["']""")
#: A concrete name's variable parts, as the page writes them.
PATTERNS = [
    (re.compile(r"^trace/reward/[^/]+/mean$"), "trace/reward/<fn>/mean"),
    (re.compile(r"^trace/(reward|rollout)_metrics/.+/mean$"), r"trace/\1_metrics/<key>/mean"),
    (re.compile(r"^fully_async/staleness/share_\d+$"), "fully_async/staleness/share_<age>"),
    (re.compile(r"^fully_async/token_share/staleness_\d+$"),
     "fully_async/token_share/staleness_<age>"),
]


def documented() -> set[str]:
    return set(re.findall(r"`([a-z_]+/[^`\s]+)`", PAGE.read_text(encoding="utf-8")))


def page_name(name: str) -> str:
    name = re.sub(r"\{(\w+)\}", r"<\1>", name)  # f-string fields: {fn} → <fn>
    for pattern, template in PATTERNS:
        if pattern.match(name):
            return pattern.sub(template, name)
    return name


def undocumented(names: set[str]) -> list[str]:
    doc = documented()
    return sorted(n for n in names
                  if page_name(n) not in doc
                  # a prefix the code extends (``critic/rewards`` + ``/mean``)
                  and not any(d.startswith(n.rstrip("/") + "/") for d in doc))


def test_every_metric_name_in_the_trainer_code_is_documented():
    names: set[str] = set()
    for folder in ("trainer", "rollout", "engine"):
        for path in (ROOT / "src" / "rltune" / folder).rglob("*.py"):
            names |= set(LITERAL.findall(path.read_text(encoding="utf-8")))
    names = {n.replace("{age}", "0") for n in names}
    assert {"actor/pg_loss", "critic/advantages/max", "validation/data/reward/mean@1"} <= names
    assert not undocumented(names), f"add to docs/metrics.md: {undocumented(names)}"


def test_page_names_match_the_placeholders():
    assert page_name("trace/reward/exact/mean") == "trace/reward/<fn>/mean"
    assert page_name("trace/reward_metrics/exact/format/mean") == \
        "trace/reward_metrics/<key>/mean"
    assert undocumented({"actor/no_such_metric"}) == ["actor/no_such_metric"]


@pytest.mark.asyncio
async def test_every_metric_a_real_tiny_job_logs_is_documented(tmp_path, tiny_model_dir):
    from rltune.config import load_job_config
    from rltune.templates import create_workspace
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics
    from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=2, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, "n_epochs": 1,
                                                "eval_steps": 1})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws).run()
    rows = read_metrics(tmp_path / "job")
    logged = {name for row in rows for name in row["metrics"]}
    assert {"critic/rewards/mean", "timing/s/step", "validation/data/reward/mean@1"} <= logged
    # every step reports the engine's prompt tokens and the part of them it computed
    steps = [row["metrics"] for row in rows if row["step"] > 0]
    assert steps and all(0 < m["engine/prefill_tokens"] < m["engine/prompt_tokens"]
                         for m in steps), steps
    assert not undocumented(logged), f"add to docs/metrics.md: {undocumented(logged)}"
