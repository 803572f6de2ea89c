"""What the server-talking commands share: the ``-o`` format, the ``--api-key`` and other
common options, printing a result, failing with the documented exit code, and the client of
the server (started first where a command needs one; a clear UNREACHABLE when none runs)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from rltune.cli.exit_codes import FAILED, USAGE, for_error
from rltune.sdk.errors import RltuneError, ServerUnreachableError


class Format(str, Enum):
    """``-o``: the output format (a choice, so --help lists it and a typo is a usage error)."""

    table = "table"
    json = "json"
    yaml = "yaml"


FORMATS = tuple(f.value for f in Format)
OUT = typer.Option(Format.table.value, "--output", "-o", "--output-format",
                   help="output format")
#: register_functions and test_functions print JSON unless told otherwise (the Bailian CLI).
OUT_JSON = typer.Option(Format.json.value, "--output", "-o", "--output-format",
                        help="output format")
KEY = typer.Option(None, "--api-key", envvar=["RLTUNE_API_KEY", "DASHSCOPE_API_KEY"],
                   help="the server's API key (default: the local admin key)")
JOB_ID = typer.Argument(..., help="the job id (ft-…)")
WORKSPACE = typer.Option(Path("./"), "--workspace-dir", "-w",
                         help="the folder the function classpaths are imported from")
HYPER = typer.Option(None, "--hyper-parameters",
                     help='JSON object of hyper-parameters, e.g. \'{"batch_size": 4}\'')
JOB_NAME = typer.Option(None, "--job-name", help="the job's name (default: generated)")


def _emit(data: Any, output: str, title: str = "") -> None:
    from rltune.functions.render import render

    output = getattr(output, "value", output)
    if output not in FORMATS:
        typer.secho(f"error: -o must be one of {', '.join(FORMATS)}", fg="red", err=True)
        raise typer.Exit(2)
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json", exclude_none=True)
    if output == "json":
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        typer.echo(render(data if isinstance(data, dict) else {"result": data}, output,
                          title=title))


def _fail(exc: Exception, code: int = FAILED) -> None:
    typer.secho(f"error: {exc}", fg="red", err=True)
    raise typer.Exit(for_error(exc, code))


def _client(api_key: Optional[str], ensure_server: bool = False, offline: bool = False):
    """The client of the server at RLTUNE_BASE_URL (or the local one): started first with
    ``ensure_server``; with ``offline`` nothing is checked (the caller starts the server)."""
    from rltune.client import AgenticRL, discovery
    from rltune.sdk.log_level import configure_logging

    try:  # LOG_LEVEL=debug: the HTTP requests too
        configure_logging("%(levelname)s %(name)s: %(message)s")
    except RltuneError as exc:
        _fail(exc, 2)

    url = discovery.base_url()
    if ensure_server:
        url = _ensure_server(url)
    elif (not offline and discovery.api_key(api_key, required=False) is None
          and not discovery.is_up(url)):  # no key as no local server ran: say so, not "no key"
        _fail(ServerUnreachableError(
            f"no rltune server is running at {url}", where=_url_source(),
            hint="start one with `rltune server start` (or point RLTUNE_BASE_URL at a "
                 "running server and set RLTUNE_API_KEY)"))
    return AgenticRL(api_key=api_key, base_url=url)


def _url_source() -> str:
    import os

    return "RLTUNE_BASE_URL" if os.environ.get("RLTUNE_BASE_URL") else "the local server"


def _ensure_server(url: str) -> str:
    """``url`` when a server answers there; else a local server started on its port (a remote
    address that does not answer is UNREACHABLE)."""
    from rltune.client import discovery

    if discovery.is_up(url):
        return url
    if not url.startswith(("http://127.0.0.1", "http://localhost")):
        _fail(ServerUnreachableError(f"no rltune server answers at {url}",
                                    where="RLTUNE_BASE_URL"))
    port = int(url.rsplit(":", 1)[-1]) if url.count(":") == 2 else 8600
    typer.secho(f"no server answers at {url}: starting a local one …", err=True)
    url = discovery.start_local_server(port=port)
    typer.secho(f"started the rltune server at {url} (stop it with `rltune server stop`)",
                err=True)
    return url


def _json_option(text: Optional[str], option: str) -> Any:
    """The JSON value of ``option`` (None when not given); a USAGE exit when it is not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(RltuneError(f"{option} is not JSON: {exc.msg}", where=option,
                          hint='write e.g. \'{"learning_rate": 1e-5}\''), USAGE)


def _split(values: list[str], option: str = "") -> list[str]:
    """Repeated, comma-separated or JSON-list values (``'["rw-1", "rw-2"]'``) → one list."""
    out: list[str] = []
    for item in values:
        text = item.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                _fail(RltuneError(f"{option or 'a list option'} looks like a JSON list but is "
                                  f"not JSON: {exc.msg}", where=option,
                                  hint='write e.g. \'["rw-1", "rw-2"]\' or rw-1,rw-2'), 2)
            if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
                _fail(RltuneError(f"{option or 'a list option'} must be a JSON list of strings",
                                  where=option, hint='write e.g. \'["rw-1", "rw-2"]\''), 2)
            out += [v for v in parsed if v]
        else:
            out += [v.strip() for v in text.split(",") if v.strip()]
    return out
