"""``rltune init workspace DIR --template calc``: a ready-to-run workspace."""

from __future__ import annotations

import shutil
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
    from rltune.templates import TEMPLATES_DIR, available

    names = available()
    if template not in names:
        typer.secho(
            f"error: unknown template {template!r}; choose one of {names}", fg="red", err=True
        )
        raise typer.Exit(2)
    if directory.exists() and any(directory.iterdir()) and not force:
        typer.secho(
            f"error: {directory} is not empty (use --force to write into it)", fg="red", err=True
        )
        raise typer.Exit(2)
    shutil.copytree(
        TEMPLATES_DIR / template,
        directory,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    if template == "calc":
        from rltune.models.recipes import recipe_for
        from rltune.models.tasks import make_dataset_rows, write_jsonl

        # The same kind of question the demo models were warm-started on.
        task = recipe_for("small").config.task
        write_jsonl(
            make_dataset_rows(train_rows, "train", seed=seed, config=task),
            directory / "data" / "train.jsonl",
        )
        write_jsonl(
            make_dataset_rows(val_rows, "heldout", seed=seed, config=task),
            directory / "data" / "val.jsonl",
        )
    typer.echo(f"created {directory} from template {template!r}")
    typer.echo(f"next: cd {directory} && rltune train -c job.yaml")
