"""The cloud CLI's verbs against the rltune server: ``rltune rl <verb>`` and ``rltune <verb>``.

register_functions, test_functions, upload_data, run (-c job.yaml or direct parameters),
submit, get/status, list, cancel, delete, logs [--follow], resume — each with
``-o table|json|yaml`` and both hyphen and underscore spellings.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from rltune.cli.exit_codes import USAGE
from rltune.cli.rl_common import (
    HYPER,
    JOB_ID,
    JOB_NAME,
    KEY,
    OUT,
    OUT_JSON,
    WORKSPACE,
    Format,
    _client,
    _emit,
    _ensure_server,
    _fail,
    _json_option,
    _split,
)
from rltune.sdk.errors import RltuneError

rl_app = typer.Typer(help="Cloud-compatible job verbs (talk to the rltune server).",
                     no_args_is_help=True)


def register_functions(
    rollout_classpaths: list[str] = typer.Option([], "--rollout-classpaths",
                                                 "--rollout-classpath",
                                                 help="module.Class of a rollout"),
    reward_classpaths: list[str] = typer.Option([], "--reward-classpaths", "--reward-classpath",
                                                help="module.Class of a reward"),
    group_reward_classpaths: list[str] = typer.Option([], "--group-reward-classpaths",
                                                      "--group-reward-classpath",
                                                      help="module.Class of a group reward"),
    workspace_dir: Path = WORKSPACE,
    lazy_load: bool = typer.Option(True, "--lazy-load/--no-lazy-load",
                                   help="load the functions when a job needs them (default), "
                                   "or now, printing their instance ids"),
    api_key: Optional[str] = KEY, output: Format = OUT_JSON,
) -> None:
    """Package the workspace and register its functions (load them with --no-lazy-load)."""
    from rltune.config.components import (
        FunctionComponentModel,
        GroupRewardFunctionComponent,
        RewardFunctionComponent,
        RolloutFunctionComponent,
    )

    classes = {"rollout": RolloutFunctionComponent, "reward": RewardFunctionComponent,
               "group_reward": GroupRewardFunctionComponent}

    comps = []
    for kind, paths in (("rollout", rollout_classpaths), ("reward", reward_classpaths),
                        ("group_reward", group_reward_classpaths)):
        for cp in _split(paths):
            comps.append(classes[kind](fcmodel=FunctionComponentModel(
                zipdir=str(workspace_dir), classpath=cp)))
    if not comps:
        _fail(RltuneError("no classpath given", hint="pass --rollout-classpaths and/or "
                          "--reward-classpaths"), 2)
    try:
        client = _client(api_key, ensure_server=True)
        ids = asyncio.run(client.register_functions(comps, lazy_load=lazy_load))
    except RltuneError as exc:
        _fail(exc)
    names = ("rollout_entity_ids", "reward_entity_ids", "group_reward_entity_ids",
             "rollout_instance_ids", "reward_instance_ids", "group_reward_instance_ids")
    _emit(dict(zip(names, ids, strict=True)), output, "registered functions")


def test_functions(
    instance_id: str = typer.Argument(..., help="a loaded function instance"),
    func_type: Optional[str] = typer.Option(None, "--type", "-t",
                                            help="ROLLOUT|REWARD|GROUP_REWARD"),
    input_json: str = typer.Option(..., "--input", "-i", help="JSON text or a file path"),
    api_key: Optional[str] = KEY, output: Format = OUT_JSON,
) -> None:
    """Send one input to a loaded instance and print the validated output."""
    from rltune.cli.functions_cmd import _read_input

    if func_type and func_type.lower() not in ("rollout", "reward", "group_reward"):
        _fail(RltuneError(f"--type {func_type!r} is not ROLLOUT, REWARD or GROUP_REWARD"), 2)
    try:
        data = _read_input(input_json)
        res = asyncio.run(_client(api_key).test_functions(
            instance_id, func_type.lower() if func_type else None, data))
    except RltuneError as exc:
        _fail(exc)
    _emit(res["output"], output, f"{instance_id}: {res['status']}")
    if res["status"] != "success":
        raise typer.Exit(1)


def upload_data(
    training_files: list[str] = typer.Option(..., "--training-files", "--training-file",
                                             help="JSONL file(s) to train on"),
    validation_files: list[str] = typer.Option([], "--validation-files", "--validation-file",
                                               help="JSONL file(s) to validate on"),
    api_key: Optional[str] = KEY, output: Format = OUT,
) -> None:
    """Upload JSONL datasets (validated row by row on the server)."""
    from rltune.cli.preflight import check_files

    try:  # a missing file: exit 2 before a server starts
        check_files(_split(training_files), "--training-files")
        check_files(_split(validation_files), "--validation-files")
    except RltuneError as exc:
        _fail(exc, USAGE)
    try:
        client = _client(api_key, ensure_server=True)
        train, val = asyncio.run(client.upload_datasets(
            training_files=_split(training_files), validation_files=_split(validation_files)))
    except RltuneError as exc:
        _fail(exc)
    _emit({"uploaded_training_ids": train, "uploaded_validation_ids": val}, output, "uploaded")


LIST = dict(show_default=False)


def run(
    config: Optional[Path] = typer.Option(None, "--config", "-c", exists=True, dir_okay=False,
                                          help="the job YAML"),
    model: Optional[str] = typer.Option(None, "--model", help="base model: a name, a "
                                        "folder or a hub id (org/name)"),
    training_files: list[str] = typer.Option([], "--training-files",
                                             help="JSONL file(s) to train on"),
    validation_files: list[str] = typer.Option([], "--validation-files",
                                               help="JSONL file(s) to validate on"),
    rollout_classpath: Optional[str] = typer.Option(None, "--rollout-classpath",
                                                    "--rollout-classpaths",
                                                    help="module.Class of the rollout"),
    reward_classpaths: list[str] = typer.Option([], "--reward-classpaths", "--reward-classpath",
                                                help="module.Class of a reward, comma-separated"),
    group_reward_classpaths: list[str] = typer.Option(
        [], "--group-reward-classpaths", help="module.Class of a group reward, comma-separated"),
    rollout_name: Optional[str] = typer.Option(None, "--rollout-name",
                                               help="the rollout's name in metrics"),
    reward_names: list[str] = typer.Option([], "--reward-names", **LIST,
                                           help="names of the rewards, in order"),
    group_reward_names: list[str] = typer.Option([], "--group-reward-names", **LIST,
                                                 help="names of the group rewards, in order"),
    rollout_weight: Optional[str] = typer.Option(None, "--rollout-weight",
                                                 help="only 1 (a rollout is not weighted)"),
    reward_weights: list[str] = typer.Option([], "--reward-weights", help="e.g. 0.7,0.3"),
    group_reward_weights: list[str] = typer.Option([], "--group-reward-weights",
                                                   help="e.g. 0.5,0.5"),
    reward_metric_weights: Optional[str] = typer.Option(
        None, "--reward-metric-weights", help='JSON list of dicts, e.g. \'[{"acc": 1}]\''),
    rollout_runtime: Optional[str] = typer.Option(
        None, "--rollout-runtime", help='JSON object, e.g. \'{"cpu": 2, "concurrency": 8}\''),
    reward_runtimes: Optional[str] = typer.Option(
        None, "--reward-runtimes", help="JSON list of objects (or one object for all)"),
    group_reward_runtimes: Optional[str] = typer.Option(
        None, "--group-reward-runtimes", help="JSON list of objects (or one object for all)"),
    hyper_parameters: Optional[str] = HYPER,
    workspace_dir: Path = WORKSPACE,
    teacher_model: Optional[str] = typer.Option(None, "--teacher-model",
                                                help="the teacher of on-policy distillation"),
    job_name: Optional[str] = JOB_NAME,
    follow: Optional[bool] = typer.Option(None, "--follow/--no-follow",
                                          help="show a progress bar until the job ends "
                                          "(default: with -o table)"),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="print where the job went (the server's address)"),
    api_key: Optional[str] = KEY, output: Format = OUT,
) -> None:
    """Register, upload and submit a job (from -c job.yaml or direct parameters), then follow.

    With -c, --model, --hyper-parameters (merged), --teacher-model and --job-name override the
    YAML; the function and dataset options are for the direct mode only.
    """
    from rltune.cli.preflight import check_dataset_files, check_files
    from rltune.cli.rl_options import function_components

    hp = _json_option(hyper_parameters, "--hyper-parameters")
    direct = {"--training-files": training_files, "--validation-files": validation_files,
              "--rollout-classpath": rollout_classpath, "--reward-classpaths": reward_classpaths,
              "--group-reward-classpaths": group_reward_classpaths,
              "--rollout-name": rollout_name, "--reward-names": reward_names,
              "--group-reward-names": group_reward_names, "--rollout-weight": rollout_weight,
              "--reward-weights": reward_weights, "--group-reward-weights": group_reward_weights,
              "--reward-metric-weights": reward_metric_weights,
              "--rollout-runtime": rollout_runtime, "--reward-runtimes": reward_runtimes,
              "--group-reward-runtimes": group_reward_runtimes}
    try:
        if config is not None:
            mixed = [opt for opt, value in direct.items() if value]
            if mixed:
                _fail(RltuneError(f"{mixed[0]} cannot be combined with -c", where=mixed[0],
                                  hint="set it in the YAML, or drop -c and give the job "
                                       "with direct options"), 2)
        elif not (model and training_files):
            _fail(RltuneError("give -c job.yaml, or --model and --training-files"), 2)
        ws = str(workspace_dir)
        fns = [] if config is not None else function_components(
            ws,
            rollout=([rollout_classpath] if rollout_classpath else [],
                     [rollout_name] if rollout_name else [],
                     [rollout_weight] if rollout_weight else [], rollout_runtime or "", ""),
            reward=(_split(reward_classpaths, "--reward-classpaths"),
                    _split(reward_names, "--reward-names"),
                    _split(reward_weights, "--reward-weights"), reward_runtimes or "",
                    reward_metric_weights or ""),
            group_reward=(_split(group_reward_classpaths, "--group-reward-classpaths"),
                          _split(group_reward_names, "--group-reward-names"),
                          _split(group_reward_weights, "--group-reward-weights"),
                          group_reward_runtimes or "", ""))
        client = _client(api_key, offline=True)  # the config comes first
        if config is not None:
            client.init(config)
        else:
            check_files(_split(training_files), "--training-files")
            check_files(_split(validation_files), "--validation-files")
            client.defaults = {"model": {"name": model}, "functions": fns, "datasets": (
                [{"type": "training", "file_name": str(Path(f).resolve())}
                 for f in _split(training_files, "--training-files")]
                + [{"type": "validation", "file_name": str(Path(f).resolve())}
                   for f in _split(validation_files, "--validation-files")])}
            client.init()
        check_dataset_files(client.tuning.datasets if client.tuning else [],
                            lambda name: client.config_dir / Path(name).expanduser(),
                            where=f"{config}: datasets" if config else "datasets")
    except RltuneError as exc:  # a bad YAML, option or file: nothing ran
        _fail(exc, USAGE)
    try:
        client.base_url = _ensure_server(client.base_url)
        job = asyncio.run(client.run(model=model, hyper_parameters=hp, job_name=job_name,
                                     teacher_model=teacher_model))
    except RltuneError as exc:
        _fail(exc)
    out = job.output
    if verbose:
        typer.echo(f"submitted {out.job_id} to {client.base_url}", err=True)
    if follow is None:
        follow = output == "table"
    if not follow:
        _emit({"job_id": out.job_id, "status": out.status,
               "message": f"submitted to {client.base_url}",
               "warnings": out.warnings or []}, output, "job")
        return
    _follow(client, out.job_id)


def _follow(client: Any, job_id: str) -> None:
    """Progress bar with live rewards until the job ends; Ctrl-C detaches."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from rltune.client.agentic_rl import run_sync
    from rltune.names import JOB_TERMINAL

    status = "PENDING"
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[status]}"), TextColumn("reward {task.fields[r]}"),
                      TextColumn("val {task.fields[v]}")) as bar:
            task = bar.add_task(job_id, total=None, status=status, r="-", v="-")
            while True:
                job = run_sync(client.http.request("GET", f"/v1/jobs/{job_id}"))
                status = job["status"]
                p = job.get("progress") or {}
                fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
                bar.update(task, completed=p.get("step", 0), total=p.get("total_steps"),
                           status=status, r=fmt(p.get("reward")), v=fmt(p.get("validation_reward")))
                if status in JOB_TERMINAL:
                    break
                time.sleep(1.0)
    except KeyboardInterrupt:
        typer.echo(f"\ndetached; {job_id} keeps running. Re-attach: rltune logs {job_id} "
                   f"--follow   (status: rltune get {job_id})")
        raise typer.Exit(0) from None
    typer.echo(f"{job_id}: {status}" + (f" — {job['error']}" if job.get("error") else ""))
    if status not in ("SUCCEEDED", "STOPPED"):  # STOPPED: ended early by `stop`, kept
        raise typer.Exit(1)


def submit(
    model: str = typer.Option(..., "--model", help="base model: a name, a folder or a "
                              "hub id (org/name)"),
    training_file_ids: list[str] = typer.Option(..., "--training-file-ids",
                                                help="uploaded file ids (file-…) to train on"),
    validation_file_ids: list[str] = typer.Option([], "--validation-file-ids",
                                                  help="uploaded file ids to validate on"),
    rollout_id: Optional[str] = typer.Option(None, "--rollout-id",
                                             help="the registered rollout (ro-…)"),
    reward_ids: list[str] = typer.Option([], "--reward-ids",
                                         help="registered rewards (rw-…), comma-separated"),
    group_reward_ids: list[str] = typer.Option([], "--group-reward-ids",
                                               help="registered group rewards (grw-…)"),
    hyper_parameters: Optional[str] = HYPER,
    job_name: Optional[str] = JOB_NAME,
    api_key: Optional[str] = KEY, output: Format = OUT,
) -> None:
    """Submit a job from ids (uploaded file ids, registered function entity ids)."""
    rollout_ids = _split([rollout_id], "--rollout-id") if rollout_id else []
    if len(rollout_ids) > 1:
        _fail(RltuneError(f"--rollout-id names {len(rollout_ids)} rollouts; a job has one",
                          where="--rollout-id", hint="give one id"), 2)
    fns = [{"type": "rollout", "entity_id": e} for e in rollout_ids] + [
        {"type": "reward", "entity_id": e} for e in _split(reward_ids, "--reward-ids")] + [
        {"type": "group_reward", "entity_id": e}
        for e in _split(group_reward_ids, "--group-reward-ids")]
    hp = _json_option(hyper_parameters, "--hyper-parameters")
    try:
        job = _client(api_key).submit_job(
            model=model, functions=fns, hyper_parameters=hp, job_name=job_name,
            training_file_ids=_split(training_file_ids, "--training-file-ids"),
            validation_file_ids=_split(validation_file_ids, "--validation-file-ids"))
    except RltuneError as exc:
        _fail(exc)
    _emit(job.output, output, "job")


def get(job_id: str = JOB_ID, api_key: Optional[str] = KEY,
        output: Format = OUT) -> None:
    """A job's status, progress and error."""
    try:
        job = _client(api_key).get(job_id).output.model_dump(exclude_none=True)
    except RltuneError as exc:
        _fail(exc)
    if output == "table":
        job.pop("config", None)
        job.pop("config_yaml", None)
    _emit(job, output, job_id)


_LIST_COLUMNS = ("job_id", "job_name", "status", "model", "latest_reward", "project", "tags")


def jobs_table(items: list[dict[str, Any]], title: str) -> Any:
    """The ``rltune list`` table: the job id and status are never cut or wrapped (at any
    width they keep theirs); the other columns give up width first, wrapping their text."""
    from rich.table import Table

    def cell(j: dict, c: str) -> str:
        if c == "tags":
            return ",".join(f"{k}={v}" for k, v in (j.get(c) or {}).items()) or "-"
        return str(j.get(c) if j.get(c) is not None else "-")

    rows = [[cell(j, c) for c in _LIST_COLUMNS] for j in items]
    table = Table(title=title)
    for i, col in enumerate(_LIST_COLUMNS):
        if col in ("job_id", "status"):
            width = max([len(col)] + [len(r[i]) for r in rows])
            table.add_column(col, no_wrap=True, min_width=width)
        else:
            table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def list_jobs(page: int = typer.Option(1, "--page", "-p", help="page to show, from 1"),
              size: int = typer.Option(10, "--size", "-s", help="jobs per page"),
              status: Optional[str] = typer.Option(None, "--status",
                                                   help="only jobs in this status, e.g. "
                                                   "RUNNING"),
              project: Optional[str] = typer.Option(None, "--project",
                                                    help="only jobs of this project"),
              tag: list[str] = typer.Option([], "--tag", help="KEY or KEY=VALUE (repeat)"),
              api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Jobs, newest first (filtered by status, project and tags)."""
    try:
        res = _client(api_key).list(page_no=page, page_size=size, status=status,
                                    project=project, tags=tag).output
    except RltuneError as exc:
        _fail(exc)
    items = [{k: v for k, v in j.model_dump().items() if k in _LIST_COLUMNS}
             for j in res["items"]]
    if output == "table":
        from rich.console import Console

        console = Console()
        if not console.is_terminal:  # piped or redirected: every cell in full, one line a job
            console = Console(width=10_000)
        console.print(jobs_table(items, f"jobs (page {page}, {res['total']} total)"))
        return
    _emit({"items": items, "total": res["total"], "page_no": page, "page_size": size}, output)


def cancel(job_id: str = JOB_ID, api_key: Optional[str] = KEY,
           output: Format = OUT) -> None:
    """Cancel a job (its processes are stopped; saved checkpoints stay)."""
    try:
        job = _client(api_key).cancel(job_id).output
    except RltuneError as exc:
        _fail(exc)
    _emit({"job_id": job.job_id, "status": job.status}, output)


def delete(job_id: str = JOB_ID, api_key: Optional[str] = KEY,
           output: Format = OUT) -> None:
    """Delete a job that is not running, with its outputs."""
    try:
        res = _client(api_key).delete(job_id).output
    except RltuneError as exc:
        _fail(exc)
    _emit(res, output)


def resume(job_id: str = JOB_ID,
           checkpoint: Optional[str] = typer.Option(None, "--checkpoint",
                                                    help="the checkpoint step to resume from "
                                                    "(default: the last)"),
           api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Continue a FAILED, CANCELED or STOPPED job from its last checkpoint."""
    try:
        job = _client(api_key, ensure_server=True).resume(job_id, checkpoint).output
    except RltuneError as exc:
        _fail(exc)
    _emit({"job_id": job.job_id, "status": job.status, "resume_from": job.resume_from}, output)


def logs(job_id: str = JOB_ID,
         offset: int = typer.Option(1, "--offset", help="first line to show, from 1"),
         lines: int = typer.Option(1000, "--lines", "--line", help="most lines to show"),
         follow: bool = typer.Option(False, "--follow", "-f",
                                     help="stream new lines until the job ends"),
         api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """A job's log lines (--follow streams them until the job ends)."""
    client = _client(api_key)
    try:
        if follow:
            async def stream() -> None:
                async for text in client.follow_logs(job_id, offset):
                    typer.echo(text)
                    sys.stdout.flush()

            try:
                asyncio.run(stream())
            except KeyboardInterrupt:
                raise typer.Exit(0) from None
            return
        res = client.logs(job_id, offset=offset, lines=lines).output
    except RltuneError as exc:
        _fail(exc)
    if output == "table":
        typer.echo("\n".join(res.logs or []))
    else:
        _emit({"job_id": job_id, "logs": res.logs,
               "next_offset": getattr(res, "next_offset", None)}, output)


VERBS = {"register_functions": register_functions, "test_functions": test_functions,
         "upload_data": upload_data, "run": run, "submit": submit, "get": get, "status": get,
         "list": list_jobs, "cancel": cancel, "delete": delete, "logs": logs, "resume": resume}
# Top-level names that exist already in other groups: the local test-functions harness, which
# hands `rltune test_functions INSTANCE_ID` (a positional instance id) to the verb here.
_TOP_LEVEL_SKIP = {"test_functions"}


def register(app: typer.Typer) -> None:
    """``rltune rl <verb>`` (both spellings) and the same verbs at the top level."""
    for name, fn in VERBS.items():
        rl_app.command(name)(fn)
        if "_" in name:
            rl_app.command(name.replace("_", "-"), hidden=True)(fn)
        if name in _TOP_LEVEL_SKIP:
            continue
        app.command(name.replace("_", "-"))(fn)
        if "_" in name:
            app.command(name, hidden=True)(fn)
    app.add_typer(rl_app, name="rl")
