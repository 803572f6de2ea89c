"""``rltune config``: the job config described (JSON Schema, reference page, synonym tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

config_app = typer.Typer(help="The job config: JSON Schema and reference.",
                         no_args_is_help=True)


def _emit(text: str, out: Optional[Path]) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {out}", err=True)


_OUT = typer.Option(None, "--out", help="write to this file instead of printing")


@config_app.command("schema")
def schema(out: Optional[Path] = _OUT) -> None:
    """Print the JSON Schema of job.yaml (for editors: `# yaml-language-server: $schema=…`)."""
    from rltune.config.reference import schema_text

    _emit(schema_text(), out)


@config_app.command("reference")
def reference(out: Optional[Path] = _OUT) -> None:
    """Print the Markdown reference of every job config key (docs/config.md)."""
    from rltune.config.reference import reference_markdown

    _emit(reference_markdown(), out)


@config_app.command("synonyms")
def synonyms(tool: str = typer.Argument("TRL", help="TRL or verl")) -> None:
    """Print the table of TRL's or verl's hyper-parameter names and rltune's."""
    from rltune.config.compat.synonyms import SYNONYMS, markdown_table

    tools = sorted({s.tool for s in SYNONYMS})
    match = next((t for t in tools if t.lower() == tool.lower()), None)
    if match is None:
        typer.secho(f"error: no table for {tool!r}; choose one of {', '.join(tools)}",
                    fg="red", err=True)
        raise typer.Exit(2)
    typer.echo(markdown_table(match), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
