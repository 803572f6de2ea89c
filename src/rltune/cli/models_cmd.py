"""``rltune models``: build, chat with and list the self-made demo models.

Heavy imports (torch, transformers) happen inside the commands, so ``rltune --help`` is fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

models_app = typer.Typer(help="Self-made tiny models: build the warm-started demo models, chat.")


def register(app: typer.Typer) -> None:
    """Attach the ``models`` command group to the root app."""
    app.add_typer(models_app, name="models")


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


@models_app.command("build-demo")
def build_demo(
    size: str = typer.Option("nano", "--size", help="nano (~0.8M, ~1.5-4 min) or small (~4.2M)."),
    seed: int = typer.Option(0, "--seed", help="Seed of tokenizer, weights and data."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if cached."),
    home: Path | None = typer.Option(None, "--home", help="RLTUNE_HOME (default ~/.rltune)."),
    task: str = typer.Option("calc", "--task", help="calc (one call) or multistep (2-4 "
                             "dependent calls: fine-tunes the calc model, nano only)."),
) -> None:
    """Build (or reuse) a warm-started calculator-agent model under RLTUNE_HOME/models."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rltune.models.factory import META_FILE, read_meta
    from rltune.models.recipes import recipe_for
    from rltune.models.registry import ensure_demo_model, model_name, models_home
    from rltune.sdk.errors import BuildError, RltuneError

    console = Console()
    try:
        recipe = recipe_for(size, task)
    except RltuneError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"--{exc.where}") from None
    target = models_home(home) / model_name(size, seed, task)
    if not force and (target / META_FILE).is_file():
        console.print(f"[green]cached[/green] {target}")
        _print_meta(console, read_meta(target) or {})
        return
    _quiet_transformers()
    last_eval: dict[str, Any] = {}
    columns = (
        # compact enough for an 80-column terminal; the legend is printed once above
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=12),
        TextColumn("{task.completed:.0f}/{task.total:.0f} {task.fields[phase]}"),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("acc {task.fields[acc]} tool {task.fields[tool]}/{task.fields[tool_acc]}"),
        TimeElapsedColumn(),
    )
    console.print(
        f"warm-starting {target.name}: held-out accuracy (acc), how often the tool is used and how "
        f"often it is then right (tool used/right), sampled every {recipe.config.eval_every} "
        f"steps; target: acc in {list(recipe.config.band)}, tool right >= "
        f"{recipe.config.min_tool_accuracy:.0%}"
    )
    if not console.is_terminal:  # CI logs, pipes: a line per evaluation, at least every 10 s
        path = _build_with_lines(size, seed, home, force, task)
    else:
        with Progress(*columns, console=console) as bar:
            task = bar.add_task(
                target.name, total=recipe.config.max_steps, loss="-", acc="-", tool="-",
                tool_acc="-", phase="",
            )

            def on_event(event: dict[str, Any]) -> None:
                if "message" in event:  # resuming, waiting for another build
                    bar.console.print(event["message"], markup=False, highlight=False)
                    return
                fields = {"loss": f"{event['loss']:.3f}", "phase": event.get("curriculum", "")}
                if event["phase"] == "eval":
                    last_eval.update(event)
                    fields.update(
                        acc=f"{event['accuracy']:.2f}",
                        tool=f"{event['tool_rate']:.2f}",
                        tool_acc=f"{event['tool_accuracy']:.2f}",
                    )
                bar.update(task, completed=event["step"], total=event["max_steps"], **fields)

            try:
                path = ensure_demo_model(size, seed=seed, home=home, progress=on_event,
                                         force=force, task=task)
            except BuildError as exc:
                bar.stop()
                console.print(f"[red]build failed:[/red] {exc}")
                raise typer.Exit(1) from None
            except KeyboardInterrupt:
                bar.stop()
                console.print(_INTERRUPTED.format(size=size, seed=seed, task=task))
                raise typer.Exit(130) from None
    console.print(f"[green]built[/green] {path}")
    _print_meta(console, read_meta(path) or {})


_INTERRUPTED = ("interrupted: the build's state is saved; run the same `rltune models build-demo "
                "--size {size} --seed {seed} --task {task}` again to resume it")


def _build_with_lines(size: str, seed: int, home: Path | None, force: bool,
                      task: str = "calc") -> Path:
    """The build with plain progress lines on stderr (``rltune.models.progress_lines``)."""
    from rltune.models.progress_lines import line_progress
    from rltune.models.registry import ensure_demo_model, model_name
    from rltune.sdk.errors import BuildError

    try:
        lines = line_progress(model_name(size, seed, task))
        return ensure_demo_model(size, seed=seed, home=home, progress=lines, force=force,
                                 task=task)
    except BuildError as exc:
        typer.echo(f"build failed: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo(_INTERRUPTED.format(size=size, seed=seed, task=task), err=True)
        raise typer.Exit(130) from None


def _print_meta(console: Any, meta: dict[str, Any]) -> None:
    acc = meta.get("heldout_accuracy")
    band = meta.get("target_band")
    console.print(
        f"  size={meta.get('size')} params={meta.get('parameters')} seed={meta.get('seed')} "
        f"held-out accuracy={acc if acc is None else round(acc, 3)} band={band} "
        f"stop={meta.get('stop_reason')} build={meta.get('build_seconds')} s"
    )


@models_app.command("chat")
def chat(
    model: str = typer.Argument(..., help="A size (nano, small), a built model name or a path."),
    question: str = typer.Argument(..., help='For example "What is 23 + 45?"'),
    temperature: float = typer.Option(1.0, "--temperature", "-t", help="0 = greedy."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    home: Path | None = typer.Option(None, "--home", help="RLTUNE_HOME (default ~/.rltune)."),
) -> None:
    """Run the calculator agent once on QUESTION and print the transcript."""
    from rich.console import Console
    from rich.text import Text

    from rltune.models.registry import resolve_model
    from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT
    from rltune.sdk.errors import RltuneError

    console = Console()
    _quiet_transformers()
    try:
        path = resolve_model(model, home)
    except RltuneError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    from transformers import AutoModelForCausalLM

    from rltune.models.agent import run_episodes
    from rltune.models.tokenizer import load_tokenizer

    lm = AutoModelForCausalLM.from_pretrained(str(path))
    tok = load_tokenizer(path)
    row = {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question},
        ],
        "tools": [CALCULATOR_TOOL],
    }
    ep = run_episodes(lm, tok, [row], temperature=temperature, seed=seed, max_turns=5)[0]
    console.print(f"[dim]model: {path}[/dim]")
    for msg in ep.messages[1:]:
        role = msg["role"]
        style = {"user": "cyan", "assistant": "green", "tool": "yellow"}.get(role, "white")
        text = msg.get("content") or ""
        for call in msg.get("tool_calls") or []:
            fn = call["function"]
            text += f"{fn['name']}({fn['arguments']})"
        console.print(Text.assemble((f"{role:>9} ", style), text))
    console.print(f"[bold]answer:[/bold] {ep.answer} (finish: {ep.finish})")


@models_app.command("consolidate")
def consolidate(
    checkpoint: Path = typer.Argument(..., help="a checkpoint-<step> folder of a job with "
                                      "checkpoint_format: sharded"),
    out: Path = typer.Option(..., "--out", help="a new folder"),
) -> None:
    """Write a sharded checkpoint's weights as a Hugging Face folder (from_pretrained-ready)."""
    from rltune.trainer.parallel.sharded import consolidate as write
    from rltune.trainer.parallel.sharded import is_sharded

    if not is_sharded(checkpoint):
        typer.secho(f"error: {checkpoint} has no sharded/ weights (checkpoint_format: sharded)",
                    fg="red", err=True)
        raise typer.Exit(2)
    if out.exists() and any(out.iterdir()):
        typer.secho(f"error: {out} exists and is not empty", fg="red", err=True)
        raise typer.Exit(2)
    _quiet_transformers()
    typer.echo(str(write(checkpoint, out)))


@models_app.command("list")
def list_cmd(
    home: Path | None = typer.Option(None, "--home", help="RLTUNE_HOME (default ~/.rltune)."),
) -> None:
    """List built models with their size, accuracy and build time."""
    from rich.console import Console
    from rich.table import Table

    from rltune.models.registry import list_models, models_home

    rows = list_models(home)
    console = Console()
    if not rows:
        console.print(f"no models under {models_home(home)}; run `rltune models build-demo`")
        return
    table = Table("name", "size", "params", "held-out acc", "build s", "path")
    for r in rows:
        acc = r.get("heldout_accuracy")
        table.add_row(
            r.get("name", "?"),
            str(r.get("size")),
            str(r.get("parameters")),
            "-" if acc is None else f"{acc:.2f}",
            str(r.get("build_seconds")),
            r["path"],
        )
    console.print(table)
