"""Volcano Ark's job operations against the rltune server: ``rltune copy`` (复制) and
``rltune stop`` (停止), also as ``rltune rl copy|stop``.

    rltune copy ft-… --set learning_rate=1e-5 --set training.hyper_parameters.n_epochs=2
    rltune stop ft-…      # ends at the next step boundary with a checkpoint → STOPPED
"""

from __future__ import annotations

from typing import Optional

import typer

from rltune.cli.rl_cmd import rl_app
from rltune.cli.rl_common import JOB_ID, KEY, OUT, Format, _client, _emit, _fail
from rltune.sdk.errors import RltuneError


def copy(job_id: str = typer.Argument(..., help="the job to copy (any state)"),
         sets: list[str] = typer.Option([], "--set", help="key=value (repeatable): a dotted "
                                        "config path or a hyper-parameter name; the value is "
                                        "YAML (4, 1e-5, true, null, a flow list)"),
         job_name: Optional[str] = typer.Option(None, "--job-name", help="the new job's name "
                                                "(default: <name>-copy)"),
         api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Submit a new job with the config of JOB_ID and the --set changes."""
    from rltune.config.overrides import parse_assignment

    try:
        overrides = dict(parse_assignment(s) for s in sets)
        job = _client(api_key).copy(job_id, overrides, job_name=job_name).output
    except RltuneError as exc:
        _fail(exc)
    _emit({"job_id": job.job_id, "job_name": job.job_name, "status": job.status,
           "copied_from": job_id}, output)


def stop(job_id: str = JOB_ID, api_key: Optional[str] = KEY,
         output: Format = OUT) -> None:
    """End a RUNNING job at its next step boundary, saving a checkpoint (it becomes STOPPED;
    `rltune cancel` kills it where it is, `rltune resume` continues a STOPPED job)."""
    try:
        job = _client(api_key).stop(job_id).output
    except RltuneError as exc:
        _fail(exc)
    _emit({"job_id": job.job_id, "status": job.status,
           "stop_requested_at": getattr(job, "stop_requested_at", None),
           "note": "the job ends at its next step boundary with a checkpoint"}, output)


def register(app: typer.Typer) -> None:
    for name, fn in (("copy", copy), ("stop", stop)):
        app.command(name)(fn)
        rl_app.command(name)(fn)
