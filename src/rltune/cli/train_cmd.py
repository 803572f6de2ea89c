"""``rltune train``: run a job in the foreground, no server needed, with a live progress bar."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import time
import traceback
from pathlib import Path
from typing import Optional

import typer

from rltune.cli.exit_codes import FAILED, INTERRUPTED, USAGE


def register(app: typer.Typer) -> None:
    app.command("train")(train)


def train(
    config: Path = typer.Option(
        ..., "--config", "-c", help="job YAML file", exists=True, dir_okay=False
    ),
    output_dir: Optional[Path] = typer.Option(
        None,
        "--output-dir",
        "-O",
        help="where metrics, trajectories, logs and checkpoints go "
        "(default: runs/<job id> next to the YAML)",
    ),
    resume: Optional[Path] = typer.Option(
        None,
        "--resume",
        help="continue from this checkpoint-<step> folder",
        exists=True,
        file_okay=False,
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar; print a summary"),
    tracker: list[str] = typer.Option(
        [],
        "--tracker",
        "-t",
        help="also log to this experiment tracker (repeatable): tensorboard, wandb, mlflow, "
        "swanlab, trackio; options come from the job's observability block",
    ),
    sets: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE",
        help="override a field: key=value (repeatable). key is a dotted path "
        "(training.hyper_parameters.learning_rate) or a hyper-parameter name, TRL's and "
        "verl's included (num_generations, actor_rollout_ref.rollout.n); value is YAML",
    ),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address",
        help="run the functions as Ray actors on this cluster (sets function_backend: ray; "
        "see docs/ray.md)",
    ),
) -> None:
    """Train a job in this process: rollouts, rewards, updates, validation, checkpoints."""
    from rltune.config.overrides import load_job_config_with_sets
    from rltune.sdk.errors import RltuneError

    try:  # the job's rules, engine keys included, run here
        job = load_job_config_with_sets(config, sets)
        if job.engine == "vllm":  # vllm not installed: refused before a run directory exists
            from rltune.engine.vllm_support import require_vllm

            require_vllm()
        if tracker:
            from rltune.config.observability import with_trackers

            job = job.model_copy(
                update={"observability": with_trackers(job.observability, tracker)}
            )
        if ray_address:
            from rltune.config import FunctionBackend

            job = job.model_copy(update={"function_backend": FunctionBackend(
                type="ray", address=ray_address)})
        from rltune.trainer.machine import check_machine

        check_machine(job)  # a device, Ray cluster or GPUs this machine lacks: all at once
        if job.tuned_model_name:
            from rltune.sdk.errors import ConfigError

            raise ConfigError("tuned_model_name publishes through the job server; `rltune "
                              "train` runs without one", where=f"{config}: tuned_model_name",
                              hint="submit with `rltune run -c job.yaml`, or remove the key and "
                              "publish later with `rltune models publish`")
    except RltuneError as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(USAGE) from err
    from rltune.doctor.plan import anti_patterns, model_parameters

    # the seed's anti-patterns: warned, not refused
    for warning in anti_patterns(job, parameters=model_parameters(job.model.name or "")):
        typer.secho(f"warning: {warning}", fg="yellow", err=True)
    base_dir = config.resolve().parent
    try:  # before anything starts: no banner, no run directory for a model that is not there
        from rltune.cli.preflight import check_dataset_files

        check_dataset_files(job.datasets, lambda name: job.resolve_path(name, base=base_dir),
                            where=f"{config}: datasets")
        _prepare_models(job)
    except RltuneError as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(USAGE) from err
    job_id = f"ft-{secrets.token_hex(6)}"
    job_dir = (output_dir or base_dir / "runs" / job_id).resolve()
    existed = job_dir.exists()
    started = time.monotonic()
    try:
        from rltune.config.download import download_to_files

        job = download_to_files(job, job_dir / "data")  # download_url datasets
        summary = asyncio.run(_run(job, job_dir, job_id, base_dir, resume, quiet))
    except RltuneError as err:  # the job started and failed
        typer.secho(f"error: {err}", fg="red", err=True)
        _after_failure(job_dir, existed)
        raise typer.Exit(FAILED) from err
    except KeyboardInterrupt:
        if not _after_failure(job_dir, existed):
            typer.secho(f"\ninterrupted; what was saved is in {job_dir}", fg="yellow", err=True)
        raise typer.Exit(INTERRUPTED) from None
    except Exception as err:
        typer.secho(f"error: {type(err).__name__}: {err}", fg="red", err=True)
        if _after_failure(job_dir, existed):
            typer.echo(traceback.format_exc(), err=True)
        raise typer.Exit(FAILED) from err
    typer.echo(json.dumps(summary, indent=2, default=str))
    typer.echo(f"outputs: {job_dir}")
    typer.secho(summary_line(summary, time.monotonic() - started), bold=True)


def _prepare_models(job) -> None:
    """Resolve the job's models, download a hub id that is not cached (a demo size still
    builds inside the run, where its progress is logged), and check that the policy's
    tool-call parser is known."""
    from rltune.config.lengths import fit_job
    from rltune.gateway.toolcalls import parser_name_for_model_dir
    from rltune.paths import check_model, download_snapshot

    for what, spec in job.model_specs().items():
        source = check_model(spec, what=what)
        path = source.path
        if source.kind == "hub" and path is None:
            typer.echo(f"downloading {source.spec} from the Hugging Face hub …", err=True)
            path = download_snapshot(source.spec)  # a cloud code's hub id
        if what == "model.name" and path is not None:
            fit_job(job, path)  # lengths that cannot fit: refused before a run folder exists
            parser_name_for_model_dir(path, job.model.tool_call_parser)
            if (job.engine or "builtin") == "builtin":
                from rltune.engine.cache_support import check_builtin_cache

                check_builtin_cache(path)  # before a run folder exists


def _after_failure(job_dir: Path, existed: bool) -> bool:
    """Remove a run folder this run created when it failed before its first step (nothing in
    it but an empty metrics file and the log); say where the log is otherwise. True if
    removed."""
    from rltune.jobdir import JobDir

    files = JobDir(job_dir)
    trained = (files.metrics.is_file() and files.metrics.stat().st_size > 0) or any(
        files.checkpoints.glob("checkpoint-*"))
    if not existed and job_dir.is_dir() and not trained:
        shutil.rmtree(job_dir, ignore_errors=True)
        typer.secho("nothing was trained; the run folder was removed", fg="yellow", err=True)
        return True
    if files.log.is_file():
        typer.secho(f"the log is in {files.log}", fg="yellow", err=True)
    return False


def summary_line(summary: dict, seconds: float) -> str:
    """One line for the end of a run: ``validation 0.43 → 0.91 (best 0.93 at step 20) in 6 min
    10 s`` (or ``(target reached at step 24)`` when ``stop_at_validation_reward`` ended it), or
    just the time when the job had no validation."""
    minutes, secs = divmod(round(seconds), 60)
    took = f"{minutes} min {secs} s" if minutes else f"{secs} s"
    first, points = summary.get("initial_validation"), summary.get("validation") or []
    budget = summary.get("stopped_by_budget")
    if budget:
        took += f" ({budget['budget']} {budget['limit']:g} reached at step {budget['step']})"
    if first is None or not points:
        return f"{summary.get('steps', '?')} steps in {took}"
    last = points[-1][1]
    best_step, best = max(points, key=lambda p: p[1])
    text = f"validation {first:.2f} → {last:.2f}"
    if best > last + 0.005:
        text += f" (best {best:.2f} at step {best_step})"
    if summary.get("stopped_at_validation_reward"):
        text += f" (target reached at step {summary['stopped_at_validation_reward']})"
    return f"{text} in {took}"


async def _run(
    job, job_dir: Path, job_id: str, base_dir: Path, resume: Optional[Path], quiet: bool
) -> dict:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from rltune.functions.output import JOB_LOG_ENV
    from rltune.jobdir import JobDir
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import build_sink

    sink = build_sink(job_dir, job)
    os.environ[JOB_LOG_ENV] = str(JobDir(job_dir).log)  # workers append their output there
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("val {task.fields[val]}"),
        TextColumn("{task.fields[extra]}"),  # OPD: the student's KL to its teacher
        TextColumn("{task.fields[tps]} tok/s"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, disable=quiet, transient=False) as bar:
        task = bar.add_task(job.name, total=None, reward="-", val="-", tps="-", extra="")
        # Piped or logged output (CI, `make demo > log`) gets no live bar: a line a step instead.
        plain = not quiet and not bar.console.is_terminal
        started = time.monotonic()
        shown = [0]  # alerts of the doctor already printed

        def on_progress(state: dict) -> None:
            from rltune.doctor import read_alerts

            alerts = read_alerts(job_dir)
            for alert in alerts[shown[0]:]:
                bar.console.print(f"doctor: {alert.line()}", style="yellow", highlight=False,
                                  markup=False)
            shown[0] = len(alerts)
            if plain:
                bar.console.print(progress_line(state, time.monotonic() - started),
                                  highlight=False)
            bar.update(task, completed=state["step"], total=state["total_steps"],
                       **_fields(state))

        try:
            trainer = Trainer(job, job_dir=job_dir, job_id=job_id, base_dir=base_dir, sink=sink,
                              progress=on_progress, functions_as_user=True)  # the user's machine
            bar.update(task, total=trainer.total_steps)
            bar.console.print(f"job {job_id}: {trainer.total_steps} steps → {job_dir}")
            return await trainer.run(resume_from=resume)
        except Exception as exc:  # the fatal error goes to train.log too, with its traceback
            sink.log(f"job failed: {type(exc).__name__}: {exc}", level="ERROR")
            sink.log(traceback.format_exc(), level="ERROR")
            raise
        finally:
            sink.close()


def _fields(state: dict) -> dict[str, str]:
    """A progress state's fields as the bar shows them (``extra``: OPD's teacher KL)."""
    kl = state.get("teacher_kl")
    return {"reward": _fmt(state.get("reward")), "val": _fmt(state.get("validation_reward")),
            "tps": f"{state.get('tokens_per_s') or 0:.0f}",
            "extra": "" if kl is None else f"teacher KL {_fmt(kl)}"}


def progress_line(state: dict, seconds: float) -> str:
    """``step 5/64 reward 0.672 val 0.684 281 tok/s 38 s``: the bar's fields as one line."""
    f = _fields(state)
    return (f"step {state['step']}/{state['total_steps']} reward {f['reward']} val {f['val']}"
            + (f" {f['extra']}" if f["extra"] else "") + f" {f['tps']} tok/s {seconds:.0f} s")


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"
