"""``rltune data convert``: verl / Hugging Face datasets → rltune JSONL, with errors by row;
``rltune data make-preferences``: calculator preference pairs for a DPO job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

data_app = typer.Typer(help="Dataset tools.", no_args_is_help=True)
_SHOWN = 20


@data_app.command("convert")
def convert(
    source: Path = typer.Argument(..., help=".parquet, .jsonl/.json, or a saved datasets folder"),
    output: Path = typer.Option(..., "--out", "--output", help="the JSONL to write"),
    prompt_key: str = typer.Option("prompt", "--prompt-key",
                                  help="dotted path of the prompt column"),
    ground_truth_key: str = typer.Option("reward_model.ground_truth", "--ground-truth-key",
                                         help="dotted path of the reference answer"),
    split: Optional[str] = typer.Option(None, "--split", help="split of a DatasetDict"),
    skip_invalid: bool = typer.Option(False, "--skip-invalid",
                                      help="write the valid rows even when some are bad"),
) -> None:
    """Convert rows shaped like TRL's (prompt, solution, …) or verl's (prompt,
    reward_model.ground_truth, data_source, …); every column is kept and the mapping shown."""
    from rltune.config.compat.convert import convert_rows, read_source
    from rltune.sdk.errors import RltuneError

    notes: dict[str, int] = {}
    try:
        rows, errors = convert_rows(read_source(source, split), notes=notes,
                                    prompt_key=prompt_key, ground_truth_key=ground_truth_key)
    except RltuneError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
    for line in errors[:_SHOWN]:
        typer.secho(f"{source}: {line}", fg="red", err=True)
    if len(errors) > _SHOWN:
        typer.secho(f"… and {len(errors) - _SHOWN} more bad rows", fg="red", err=True)
    if errors and not skip_invalid:
        typer.secho(f"{len(errors)} of {len(rows) + len(errors)} rows are bad; nothing written "
                    "(fix them, or pass --skip-invalid)", fg="red", err=True)
        raise typer.Exit(1)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    for note, count in notes.items():
        typer.echo(f"mapped {note} ({count} row{'s' if count != 1 else ''})")
    typer.echo(f"wrote {len(rows)} rows to {output}"
               + (f" (skipped {len(errors)} bad rows)" if errors else ""))


@data_app.command("make-preferences")
def make_preferences(
    output: Path = typer.Option(..., "--out", "--output", help="the JSONL to write"),
    rows: int = typer.Option(64, "--rows", min=1, help="how many preference pairs"),
    split: str = typer.Option("train", "--split",
                              help="train, or heldout (questions never in train)"),
    seed: int = typer.Option(0, "--seed", help="random seed of the questions and wrong answers"),
    digits: int = typer.Option(2, "--digits", help="operand digits of the questions (1-6)"),
) -> None:
    """Calculator preference pairs (prompt, chosen, rejected) for an ``algorithm: dpo`` job:
    chosen is the correct calculator use, rejected a wrong one (a guess without the tool, or
    the tool called on another expression). Each row keeps its ``solution``, so the same file
    also validates an RL job."""
    from rltune.models.tasks import TaskConfig, write_jsonl
    from rltune.models.transcripts import preference_rows
    from rltune.sdk.errors import RltuneError

    try:
        if split not in ("train", "heldout"):
            raise RltuneError(f"--split {split!r} is not train or heldout")
        made = preference_rows(rows, split, seed, TaskConfig(digits=digits))  # type: ignore[arg-type]
    except RltuneError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    write_jsonl(made, output)
    typer.echo(f"wrote {len(made)} preference pairs ({split}) to {output}")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
