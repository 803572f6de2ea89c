"""``rltune ark …`` (and ``python -m rltune.ark …``): Volcano Ark's CLI verbs on rltune.

=================================================  =============================================
Ark                                                rltune
=================================================  =============================================
``ark init workspace DIR --template T``            the ``rl_demo`` / ``rl_search_mcp_demo``
                                                   templates
``ark create mcj -f job.yaml``                     register the plugins, upload the data and
                                                   submit to the rltune server (``rltune run``)
``ark list mcj -ps -pn -t -p``                     ``GET /v1/jobs`` (``-t``: the algorithm,
                                                   ``-p``: Ark's phase → the job status)
``ark get mcj ID``                                 ``GET /v1/jobs/{id}``
``ark pull mcj ID [--include-data]                 the job's ``job.yaml``, its plugin code (the
[--include-plugin]``                               registered archives) and data files
``ark get foundation-model --model M               the hyper-parameters an Ark job may set, with
--fields hyperparameters``                         rltune's name, default and range
``ark test pipeline_plugin --fn M:F --request J``  one local call with Ark's request shape
``ark login [--url U] [--api-key K]``              check the key (``GET /v1/whoami``) and save
                                                   the URL and key for every client
                                                   (``$RLTUNE_HOME/login.json``); ``ark logout``
=================================================  =============================================
"""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path
from typing import Any, Optional

import typer

from rltune.sdk.errors import RltuneError

ark_app = typer.Typer(help="Volcano Ark's CLI verbs (ark login/init/create/list/get/pull/test).",
                      no_args_is_help=True)
_init = typer.Typer(help="init workspace", no_args_is_help=True)
_create = typer.Typer(help="create mcj", no_args_is_help=True)
_list = typer.Typer(help="list mcj", no_args_is_help=True)
_get = typer.Typer(help="get mcj | foundation-model", no_args_is_help=True)
_pull = typer.Typer(help="pull mcj", no_args_is_help=True)
_test = typer.Typer(help="test pipeline_plugin", no_args_is_help=True)
for _name, _sub in (("init", _init), ("create", _create), ("list", _list), ("get", _get),
                    ("pull", _pull), ("test", _test)):
    ark_app.add_typer(_sub, name=_name)

#: Ark template names → rltune templates.
TEMPLATES = {"rl_demo": "rl_demo", "rl_search_mcp_demo": "rl_search_mcp_demo"}
#: Ark's job phases → rltune job statuses.
PHASES = {"queued": "PENDING", "pending": "PENDING", "running": "RUNNING",
          "completed": "SUCCEEDED", "succeeded": "SUCCEEDED", "failed": "FAILED",
          "terminated": "CANCELED", "canceled": "CANCELED", "cancelled": "CANCELED"}
#: Ark's customization types → the rltune algorithm they train with.
TYPES = {"grpo": "grpo", "grpolora": "grpo"}
KEY = typer.Option(None, "--api-key", envvar=["RLTUNE_API_KEY", "ARK_API_KEY"],
                   help="default: the local admin key")
OUT = typer.Option("table", "--output", "-o", help="table|json|yaml")


def _fail(exc: Exception, code: int = 1) -> None:
    typer.secho(f"error: {exc}", fg="red", err=True)
    raise typer.Exit(code)


def _emit(data: Any, output: str, title: str = "") -> None:
    from rltune.cli.rl_common import _emit as emit

    emit(data, output, title)


@_init.command("workspace")
def init_workspace(directory: Path = typer.Argument(..., help="the folder to create"),
                   template: str = typer.Option("rl_demo", "--template", "-t",
                                                help="rl_demo | rl_search_mcp_demo"),
                   force: bool = typer.Option(False, "--overwrite", "--force",
                                              help="write into a non-empty folder")) -> None:
    """A workspace from one of Ark's templates."""
    from rltune.templates import create_workspace

    if template not in TEMPLATES:
        _fail(RltuneError(f"--template {template!r} is not an Ark template",
                          hint=f"use one of {', '.join(TEMPLATES)}"), 2)
    try:
        create_workspace(directory, TEMPLATES[template], force=force)
    except RltuneError as exc:
        _fail(exc)
    typer.echo(f"created {directory} from Ark template {template!r}")


@_create.command("mcj")
def create_mcj(file: Path = typer.Option(..., "--file", "-f", exists=True, dir_okay=False,
                                         help="the job YAML (Ark's or rltune's)"),
               debug: bool = typer.Option(False, "--debug", help="Ark's debug run; refused "
                                          "here (no counterpart in rltune)"),
               api_key: Optional[str] = KEY, output: str = OUT) -> None:
    """Register the plugins, upload the data and submit the job to the rltune server."""
    from rltune.cli.rl_common import _client

    if debug:
        _fail(RltuneError("--debug has no counterpart in rltune", where="--debug",
                          hint="test plugins with rltune ark test pipeline_plugin"), 2)
    try:
        client = _client(api_key, ensure_server=True)
        client.init(file)
        job = asyncio.run(client.run()).output
    except RltuneError as exc:
        _fail(exc)
    _emit({"id": job.job_id, "status": job.status}, output, "model customization job")


@_list.command("mcj")
def list_mcj(page_size: int = typer.Option(10, "--page-size", "-ps", help="jobs per page"),
             page_number: int = typer.Option(1, "--page-number", "-pn",
                                             help="page to show, from 1"),
             customization_type: Optional[str] = typer.Option(
                 None, "--customization_type", "--customization-type", "-t",
                 help="only jobs of this type: GRPO or GRPOLoRA"),
             phase: Optional[str] = typer.Option(None, "--phase", "-p",
                                                 help="only jobs in this phase, e.g. Running, "
                                                 "Completed, Failed"),
             api_key: Optional[str] = KEY, output: str = OUT) -> None:
    """Jobs, newest first."""
    from rltune.cli.rl_common import _client

    status = None
    if phase:
        status = PHASES.get(phase.lower())
        if status is None:
            _fail(RltuneError(f"--phase {phase!r} is not an Ark phase",
                              hint=f"use one of {', '.join(sorted(set(PHASES)))}"), 2)
    algorithm = None
    if customization_type:
        algorithm = TYPES.get(customization_type.lower())
        if algorithm is None:
            _fail(RltuneError(f"--customization_type {customization_type!r} has no "
                              "counterpart in rltune", hint="use GRPO or GRPOLoRA"), 2)
    try:
        res = _client(api_key).list(page_no=page_number, page_size=page_size, status=status,
                                    algorithm=algorithm).output
    except RltuneError as exc:
        _fail(exc)
    items = [{"id": j.job_id, "name": j.job_name, "phase": j.status, "model": j.model,
              "project": getattr(j, "project", None), "latest_reward":
              getattr(j, "latest_reward", None)} for j in res["items"]]
    _emit({"items": items, "total": res["total"], "page_number": page_number,
           "page_size": page_size}, output, "model customization jobs")


@_get.command("mcj")
def get_mcj(job_id: str = typer.Argument(..., help="the job id"), api_key: Optional[str] = KEY,
            output: str = OUT) -> None:
    """A job's status, progress, metadata and configuration."""
    from rltune.cli.rl_cmd import get

    get(job_id=job_id, api_key=api_key, output=output)


@_get.command("foundation-model")
def get_foundation_model(model: str = typer.Option(..., "--model", help="the model name"),
                         version: Optional[str] = typer.Option(
                             None, "--version", help="the model version (appended as -VERSION)"),
                         fields: list[str] = typer.Option(
                             ["hyperparameters"], "--fields",
                             help="what to show, comma-separated (default hyperparameters)"),
                         output: str = OUT) -> None:
    """The hyper-parameters a job may set (Ark's names, rltune's, defaults and ranges)."""
    from rltune.ark.foundation import foundation_model

    try:
        out = foundation_model(model + (f"-{version}" if version else ""),
                               [f for item in fields for f in item.split(",") if f])
    except RltuneError as exc:
        _fail(exc, 2)
    if output == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{out['model']}: hyperparameters")
        for col in ("name", "rltune", "default", "range"):
            table.add_column(col)
        for h in out.get("hyperparameters", []):
            table.add_row(h["name"], h["rltune"], str(h["default"]),
                          ", ".join(f"{k} {v}" for k, v in h["range"].items()) or "-")
        Console().print(table)
        return
    _emit(out, output)


def _write_archive(data: bytes, dest: Path) -> list[str]:
    """Extract a registered workspace zip into ``dest`` (names checked: no absolute or ..)."""
    names = []
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            parts = Path(info.filename).parts
            if info.is_dir() or Path(info.filename).is_absolute() or ".." in parts:
                continue
            target = dest / Path(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            names.append(info.filename)
    return names


@_pull.command("mcj")
def pull_mcj(job_id: str = typer.Argument(..., help="the job id"),
             directory: Optional[Path] = typer.Option(None, "--output-dir", "-d",
                                                      help="default: ./<job id>"),
             include_data: bool = typer.Option(False, "--include-data/--exclude-data",
                                               help="also the datasets, into data/"),
             include_plugin: bool = typer.Option(True, "--include-plugin/--exclude-plugin",
                                                 help="also the plugin (function) code"),
             api_key: Optional[str] = KEY) -> None:
    """The job's job.yaml, plugin code and (with --include-data) data into a folder."""
    from rltune.cli.rl_common import _client
    from rltune.client.agentic_rl import run_sync

    dest = directory or Path(job_id)
    if dest.exists() and any(dest.iterdir()):
        _fail(RltuneError(f"{dest} exists and is not empty", where=str(dest),
                          hint="choose a new folder with -d"), 2)
    try:
        client = _client(api_key)
        job = run_sync(client.http.request("GET", f"/v1/jobs/{job_id}"))
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "job.yaml").write_text(job.get("config_yaml") or "", encoding="utf-8")
        pulled: dict[str, Any] = {"job.yaml": 1}
        if include_plugin:
            seen: set[str] = set()
            for fn in (job.get("config") or {}).get("functions", []):
                entity = fn.get("entity_id")
                if not entity or entity in seen:
                    continue
                seen.add(entity)
                resp = run_sync(client.http.request("GET", f"/v1/functions/{entity}/archive",
                                                    raw=True))
                pulled[entity] = len(_write_archive(resp.content, dest))
        if include_data:
            for key in ("training_file_ids", "validation_file_ids"):
                for fid in job.get(key) or []:
                    meta = run_sync(client.http.request("GET", f"/v1/files/{fid}"))
                    resp = run_sync(client.http.request("GET", f"/v1/files/{fid}/content",
                                                        raw=True))
                    name = Path(str(meta.get("filename") or f"{fid}.jsonl")).name
                    (dest / "data").mkdir(exist_ok=True)
                    if (dest / "data" / name).exists():  # two uploads of one name
                        name = f"{fid}-{name}"
                    (dest / "data" / name).write_bytes(resp.content)
                    pulled[fid] = name
    except RltuneError as exc:
        _fail(exc)
    typer.echo(json.dumps({"job_id": job_id, "folder": str(dest), "pulled": pulled}, indent=2))


@_test.command("pipeline_plugin")
def test_pipeline_plugin(fn: str = typer.Option(..., "--fn", help="module:function"),
                         request: str = typer.Option(..., "--request",
                                                     help="JSON text or a file"),
                         sync: bool = typer.Option(True, "--sync/--no-sync",
                                                   help="(always synchronous here)"),
                         workspace: Path = typer.Option(
                             Path("."), "--workspace", "-w",
                             help="the folder the plugin is imported from"),
                         output: str = typer.Option("json", "--output", "-o",
                                                    help="output format: table|json|yaml")) -> None:
    """One call of a plugin with Ark's request shape ({context, proxy, sample})."""
    from rltune.ark.local_test import run_plugin
    from rltune.cli.functions_cmd import _read_input

    try:
        data = _read_input(request)
        out = run_plugin(fn, data, workspace=workspace)
    except RltuneError as exc:
        _fail(exc)
    _emit(out, output, fn)
    if out["status"] != "success":
        raise typer.Exit(1)


# Ark's older docs call it `ark test plugin`.
_test.command("plugin", hidden=True)(test_pipeline_plugin)


@ark_app.command("login")
def login(url: Optional[str] = typer.Option(None, "--url", envvar="RLTUNE_BASE_URL",
                                            help="the rltune server (asked when not given)"),
          api_key: Optional[str] = typer.Option(None, "--api-key",
                                                envvar=["RLTUNE_API_KEY", "ARK_API_KEY"],
                                                help="asked, hidden, when not given")) -> None:
    """Save the server URL and API key that `rltune ark …`, `rltune …` and the SDK use.

    Ark asks for AK/SK, region and project; rltune needs the server's URL and one API key (its
    workspace is the project). The key is checked with the server before it is saved."""
    from rltune.client import discovery
    from rltune.client.agentic_rl import run_sync
    from rltune.client.http import Transport

    if url is None:
        url = typer.prompt("rltune server URL", default=discovery.base_url())
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        _fail(RltuneError(f"--url {url!r} is not an http(s) URL", where="--url",
                          hint="e.g. http://127.0.0.1:8600"), 2)
    if not api_key:
        api_key = typer.prompt("API key", hide_input=True).strip()
    try:
        who = run_sync(Transport(url, api_key, timeout=30, retries=1).request("GET",
                                                                               "/v1/whoami"))
    except RltuneError as exc:
        _fail(exc)
    path = discovery.save_login(url, api_key)
    typer.echo(f"logged in to {url} as {who['key_id']} (workspace {who['workspace']!r}"
               f"{', admin' if who.get('admin') else ''}); saved in {path}")


@ark_app.command("logout")
def logout() -> None:
    """Forget the saved login (the clients fall back to RLTUNE_* and the local server)."""
    from rltune.client import discovery

    path = discovery.login_path()
    existed = path.is_file()
    path.unlink(missing_ok=True)
    typer.echo(f"removed {path}" if existed else "no saved login")


def register(app: typer.Typer) -> None:
    app.add_typer(ark_app, name="ark")
