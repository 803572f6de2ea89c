"""``rltune server start|stop|status``: the local job server (127.0.0.1:8600 by default)."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Optional

import typer

from rltune.cli.rl_common import OUT, Format
from rltune.paths import server_home

server_app = typer.Typer(help="Run the job server (REST API, scheduler, store).",
                         no_args_is_help=True)


@server_app.command("start")
def start(
    port: int = typer.Option(8600, "--port", "-p", envvar="RLTUNE_SERVER_PORT",
                            help="port to listen on"),
    host: str = typer.Option("127.0.0.1", "--host", help="bind address (keep 127.0.0.1 "
                             "unless the machine is yours alone)"),
    db: Optional[str] = typer.Option(None, "--db", envvar="RLTUNE_DB_URL",
                                     help="SQLAlchemy URL, e.g. postgresql://…; default SQLite"),
    max_concurrent_jobs: int = typer.Option(1, "--max-concurrent-jobs", "-j",
                                            help="jobs run at once; the others wait PENDING"),
    max_upload_bytes: Optional[int] = typer.Option(
        None, "--max-upload-bytes", help="largest dataset or workspace upload, in bytes "
        "(default 200 MiB)"),
    foreground: bool = typer.Option(False, "--foreground", "-f", help="do not detach"),
    allow_unisolated: bool = typer.Option(
        False, "--allow-unisolated", help="serve several workspaces even when function code "
        "cannot be sandboxed (no bubblewrap): tenants could read each other's data"),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address", envvar="RLTUNE_RAY_ADDRESS",
        help="run jobs' functions as Ray actors on this cluster (HOST:PORT of its head; this "
        "machine must be a node of it); the trainer and engine stay here. See docs/ray.md"),
) -> None:
    """Start the server (detached unless --foreground); prints its URL."""
    from rltune.client import discovery

    info = discovery.local_server_info()
    if info and discovery.is_up(info["url"]):
        typer.echo(f"already running: {info['url']} (pid {info['pid']})")
        return
    args = ["--max-concurrent-jobs", str(max_concurrent_jobs)]
    args += ["--db", db] if db else []
    args += ["--max-upload-bytes", str(max_upload_bytes)] if max_upload_bytes else []
    args += ["--allow-unisolated"] if allow_unisolated else []
    args += ["--ray-address", ray_address] if ray_address else []
    if foreground:
        from rltune.server.__main__ import main

        raise typer.Exit(main(["--host", host, "--port", str(port), *args]))
    try:
        url = discovery.start_local_server(port=port, host=host, extra_args=args)
    except Exception as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"rltune server running at {url}")
    typer.echo(f"admin key: {server_home() / 'admin.key'}")


@server_app.command("stop")
def stop(timeout: float = typer.Option(20.0, help="seconds to wait")) -> None:
    """Stop the local server (running jobs are stopped and can be resumed)."""
    from rltune.client import discovery

    info = discovery.local_server_info()
    if not info:
        typer.echo("no local server is running")
        return
    try:
        os.kill(int(info["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        (server_home() / "server.json").unlink(missing_ok=True)
        typer.echo("no local server is running (removed a stale server.json)")
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(int(info["pid"]), 0)
        except ProcessLookupError:
            typer.echo(f"stopped server pid {info['pid']}")
            return
        time.sleep(0.2)
    typer.secho(f"server pid {info['pid']} did not stop in {timeout:.0f}s", fg="red", err=True)
    raise typer.Exit(1)


@server_app.command("status")
def status(output: Format = OUT) -> None:
    """Is a server answering? Where, and how many jobs run / wait."""
    import httpx

    from rltune.cli.exit_codes import UNREACHABLE
    from rltune.client import discovery
    from rltune.functions.render import render

    url = discovery.base_url()
    try:
        health = httpx.get(f"{url}/health", timeout=3).json()
    except httpx.HTTPError:
        typer.echo(render({"url": url, "status": "down"}, output) if output != "json"
                   else json.dumps({"url": url, "status": "down"}))
        raise typer.Exit(UNREACHABLE) from None
    typer.echo(render({"url": url, **health}, output))


def register(app: typer.Typer) -> None:
    app.add_typer(server_app, name="server")
