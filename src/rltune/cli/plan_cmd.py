"""``rltune plan -c job.yaml``: a short calibration on this machine (two training steps of the
job's real size: rollouts, rewards and one update each), then the estimated seconds per step,
total time, peak memory and tokens, and warnings about settings that cannot work here
(``rltune.doctor.plan``). Nothing of the calibration is kept.

Example::

    rltune plan -c job.yaml          # estimate + warnings; exit 1 when there are warnings
    rltune plan -c job.yaml --json
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

import typer

CALIBRATION_STEPS = 2


def plan(
    config: Path = typer.Option(..., "--config", "-c", help="job YAML file", exists=True,
                                dir_okay=False),
    steps: int = typer.Option(CALIBRATION_STEPS, "--steps", min=1, max=20,
                              help="calibration steps to run"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    sets: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE",
        help="override a field, as rltune train --set does (TRL's and verl's names included)"),
) -> None:
    """Calibrate a job on this machine: seconds per step, total time, memory, tokens, and
    warnings about settings that cannot work here."""
    from rltune.config.lengths import fit_job
    from rltune.config.overrides import load_job_config_with_sets
    from rltune.sdk.errors import RltuneError

    try:
        job = load_job_config_with_sets(config, sets)
        job, notes = fit_job(job, policy_dir(job))  # the one length rule, as train and run
        report = {"notes": notes, **asyncio.run(calibrate(job, config.resolve().parent, steps))}
    except RltuneError as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(2) from err
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        est = report["estimate"]
        for note in report["notes"]:
            typer.echo(note)
        typer.echo(f"calibrated on {report['calibration_steps']} steps ({report['cpu']}):")
        typer.echo(f"  {est['seconds_per_step']:.2f} s/step x {est['total_steps']} steps"
                   f" + {est['validations']} validations ≈ {_took(est['total_seconds'])}")
        typer.echo(f"  tokens: {est['tokens_per_step']} a step, {est['total_tokens']} in all")
        if est["peak_memory_gb"] is not None:
            typer.echo(f"  peak memory: {est['peak_memory_gb']:.2f} GB")
        for w in report["warnings"]:
            typer.secho(f"warning: {w}", fg="yellow")
    raise typer.Exit(1 if report["warnings"] else 0)


def _took(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


async def calibrate(job: Any, base_dir: Path, steps: int) -> dict[str, Any]:
    """Run ``steps`` training steps of ``job`` (no validation, checkpoints, trackers or
    doctor) in a throwaway folder and estimate the whole job from them."""
    from rltune.config.data import load_dataset
    from rltune.doctor.plan import estimate, warnings
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    def rows(datasets: list) -> int:
        return sum(len(load_dataset(job.resolve_path(d.file_name, base=base_dir)))
                   for d in datasets if d.file_name)

    total_steps = job.hyper_parameters.total_steps(rows(job.training_datasets))
    val_rows = rows(job.validation_datasets)
    hp = job.hyper_parameters.model_copy(update={
        "max_steps": steps, "save_strategy": "no", "stop_at_validation_reward": None,
        "max_wall_time": None, "max_tokens": None})
    short = job.model_copy(update={
        "datasets": job.training_datasets, "observability": None,
        "training": job.training.model_copy(update={"hyper_parameters": hp}),
        "advisor": job.advisor.model_copy(update={"enabled": False})})
    with tempfile.TemporaryDirectory(prefix="rltune-plan-") as tmp:
        trainer = Trainer(short, job_dir=tmp, base_dir=base_dir, functions_as_user=True)
        await trainer.run()
        rows = [r["metrics"] for r in read_metrics(tmp) if r["step"] > 0]
        tokens = [sum(json.loads(line)["prompt_tokens"] + json.loads(line)["response_tokens"]
                      for line in p.read_text().splitlines())
                  for p in sorted((Path(tmp) / "trajectories").glob("step_*.jsonl"))]
    per_step = [r["timing/s/step"] for r in rows]
    rollouts = job.hyper_parameters.batch_size * job.hyper_parameters.n_rollouts
    per_rollout = sum(r["timing/s/rollout"] for r in rows) / len(rows) / max(1, rollouts)
    val_n = val_rows * job.hyper_parameters.val_n_rollouts
    validations = (total_steps // job.hyper_parameters.eval_steps + 1) if val_n else 0
    peaks = [r.get("perf/max_memory_allocated_gb") or r.get("perf/cpu_memory_peak_gb")
             for r in rows]
    est = estimate(step_seconds=per_step, total_steps=total_steps,
                   tokens_per_step=sum(tokens) / max(1, len(tokens)),
                   val_seconds=per_rollout * val_n, validations=validations,
                   peak_memory_gb=max((p for p in peaks if p is not None), default=None))
    return {"calibration_steps": steps, "cpu": cpu_model(), "estimate": est,
            "measured_seconds_per_step": per_step,
            "warnings": warnings(job, seconds_per_step=est["seconds_per_step"],
                                 cores=os.cpu_count() or 1, val_rows=val_rows,
                                 mean_tokens=sum(tokens) / max(1, len(tokens)) / max(1, rollouts))}


def policy_dir(job: Any) -> Optional[Path]:
    """The policy's folder when it is here already (None for a demo size not built yet or a
    hub id not cached: the trainer fits the lengths once it has the model)."""
    from rltune.paths import check_model

    return check_model(job.model.name or "").path


def cpu_model() -> str:
    """``lscpu``'s model name (the CPU the estimate holds for)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f", {os.cpu_count()} cores"
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"
