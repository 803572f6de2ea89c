"""``rltune init workspace DIR --template calc``: a ready-to-run workspace."""

from __future__ import annotations

from pathlib import Path

import typer

init_app = typer.Typer(help="Create workspaces from templates.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(init_app, name="init")


@init_app.command("workspace")
def workspace(
    directory: Path = typer.Argument(..., help="folder to create"),
    template: str = typer.Option("calc", "--template", "-t", help="template name"),
    train_rows: int = typer.Option(2000, help="generated training rows"),
    val_rows: int = typer.Option(64, help="generated held-out validation rows"),
    seed: int = typer.Option(0, help="seed of the generated data"),
    force: bool = typer.Option(False, "--force", help="write into a non-empty folder"),
) -> None:
    """Copy a template (functions/, job.yaml, requirements.txt) and generate its data/."""
    from rltune.sdk.errors import ValidationError
    from rltune.templates import create_workspace

    try:
        create_workspace(
            directory, template, train_rows=train_rows, val_rows=val_rows, seed=seed, force=force
        )
    except ValidationError as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(2) from err
    typer.echo(f"created {directory} from template {template!r}")
    typer.echo(f"next: cd {directory} && rltune train -c job.yaml")
