"""``rltune console``: open the web console of the job server in a browser.

Example::

    rltune server start        # once
    rltune console             # opens http://127.0.0.1:8600/ ; sign in with the admin key
    rltune console --no-browser --show-key
"""

from __future__ import annotations

from typing import Optional

import typer


def console_url(base: str) -> str:
    """The console page of a server whose API is at ``base``."""
    return base.rstrip("/") + "/"


def register(app: typer.Typer) -> None:
    @app.command("console")
    def console(
        url: Optional[str] = typer.Option(
            None,
            "--url",
            envvar="RLTUNE_BASE_URL",
            help="server address (default: the local server, else http://127.0.0.1:8600)",
        ),
        browser: bool = typer.Option(
            True, "--browser/--no-browser", help="open a browser (else only print the address)"
        ),
        start: bool = typer.Option(False, "--start", help="start a local server if none answers"),
        show_key: bool = typer.Option(
            False, "--show-key", help="print the local admin key to paste at sign-in"
        ),
    ) -> None:
        """Open the web console (jobs, metrics, trajectories, logs, checkpoints)."""
        from rltune.cli.exit_codes import UNREACHABLE
        from rltune.client import discovery
        from rltune.paths import server_home

        base = discovery.base_url(url)
        if not discovery.is_up(base):
            if not start:
                typer.secho(f"error: no rltune server answers at {base}", fg="red", err=True)
                typer.echo(
                    "hint: start one with `rltune server start` (or pass --start), "
                    "or point --url / RLTUNE_BASE_URL at a running server",
                    err=True,
                )
                raise typer.Exit(UNREACHABLE)
            try:
                base = discovery.start_local_server()
            except Exception as exc:
                typer.secho(f"error: {exc}", fg="red", err=True)
                raise typer.Exit(1) from None
        page = console_url(base)
        typer.echo(f"rltune console: {page}")
        key_file = server_home() / "admin.key"
        if show_key:
            key = discovery.api_key(required=False, url=base)
            typer.echo(f"API key: {key}" if key else "no local API key found")
        elif key_file.is_file():
            typer.echo(f"sign in with an API key (the local admin key is in {key_file})")
        if browser:
            import webbrowser

            if not webbrowser.open(page):
                typer.echo("could not open a browser here; open the address above yourself")
