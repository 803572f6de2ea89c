"""``observability.metric_names``: the vocabulary tables and docs/metrics.md agree, and every
alias names a metric rltune logs (a name on the metrics page)."""

from __future__ import annotations

from pathlib import Path

from rltune.observability.vocab import TRL, VERL, aliases, markdown_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_the_docs_table_is_the_modules():
    assert markdown_table() in PAGE.read_text(encoding="utf-8"), (
        "update the table in docs/metrics.md from rltune.observability.vocab.markdown_table()")


def test_every_aliased_name_is_a_documented_rltune_metric():
    text = PAGE.read_text(encoding="utf-8")
    for name in {*TRL, *VERL}:
        assert f"`{name}`" in text.split("## TRL's and verl's names")[0], name


def test_aliases_leave_rltunes_own_names_and_unknown_metrics_alone():
    metrics = {"actor/pg_loss": 1.0, "actor/ppo_kl": 0.1}
    assert aliases(metrics, ["rltune", "verl"]) == {}  # verl's actor/* are rltune's names
    assert aliases(metrics, ["trl"]) == {"loss": 1.0}
