"""``rltune shims install|uninstall``: optional ``dashscope`` and ``ark`` commands that run rltune.

A pip extra cannot add console scripts (a package's entry points are installed with it, extra
or not), and rltune must not own the name ``dashscope`` or ``ark``: a real ``dashscope``
install brings its own ``dashscope`` command. So the two commands are written on request into
the environment's scripts folder (where pip puts console scripts), and never over a file that
is not rltune's:

- ``dashscope …`` runs ``rltune …`` (``dashscope rl run -c job.yaml`` = ``rltune rl run -c
  job.yaml``), with a warning when a real ``dashscope`` package is importable;
- ``ark …`` runs ``rltune ark …``.

Example (shell)::

    rltune shims install            # into this environment's bin/
    dashscope rl run -c job.yaml
    rltune shims uninstall          # removes only the files it wrote
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from typing import Optional

import typer

#: Shim name → the rltune arguments it puts before the user's.
SHIMS: dict[str, tuple[str, ...]] = {"dashscope": (), "ark": ("ark",)}
MARKER = "# rltune shim"

shims_app = typer.Typer(help="Optional `dashscope` and `ark` commands that run rltune.",
                        no_args_is_help=True)


def forward(name: str, argv: Optional[list[str]] = None) -> int:
    """Run the rltune command line as shim ``name`` does: ``name ARGS`` → ``rltune PREFIX ARGS``."""
    if name == "dashscope":
        from rltune.reinforcement.alias import dashscope_warning

        warning = dashscope_warning()
        if warning:
            print(warning, file=sys.stderr)
    from rltune.cli.main import app

    args = [*SHIMS[name], *(sys.argv[1:] if argv is None else argv)]
    try:
        app(args=args, prog_name=name if not SHIMS[name] else "rltune")
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def _script(name: str) -> str:
    return (f"#!{sys.executable}\n{MARKER} (`rltune shims install`): `{name} …` runs "
            f"`rltune {' '.join([*SHIMS[name], '…'])}`. Remove it: `rltune shims uninstall`.\n"
            "import sys\n\nfrom rltune.cli.shims_cmd import forward\n\n"
            f"sys.exit(forward({name!r}))\n")


def _ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace").splitlines()[1]
    except (OSError, IndexError):
        return False


def _bin(bin_dir: Optional[Path]) -> Path:
    return bin_dir or Path(sysconfig.get_path("scripts"))


BIN = typer.Option(None, "--bin", help="the folder to write into (default: this environment's "
                   "scripts folder, where pip puts console scripts)")


@shims_app.command("install")
def install(bin_dir: Optional[Path] = BIN) -> None:
    """Write the `dashscope` and `ark` commands; a file of that name that rltune did not write
    (a real dashscope's command) is left alone and named."""
    folder = _bin(bin_dir)
    folder.mkdir(parents=True, exist_ok=True)
    refused = []
    for name in SHIMS:
        path = folder / name
        if path.exists() and not _ours(path):
            refused.append(path)
            continue
        path.write_text(_script(name), encoding="utf-8")
        os.chmod(path, 0o755)
        typer.echo(f"wrote {path}: `{name} …` runs `rltune {' '.join([*SHIMS[name], '…'])}`")
    for path in refused:
        typer.secho(f"error: {path} exists and is not rltune's (e.g. the real {path.name} "
                    "package's command): left as it is", fg=typer.colors.RED, err=True)
        typer.echo(f"hint: run `rltune {' '.join([*SHIMS[path.name], '…'])}` or `python -m "
                   f"{'rltune.reinforcement' if path.name == 'dashscope' else 'rltune.ark'} "
                   "…` instead", err=True)
    if refused:
        raise typer.Exit(1)
    from rltune.reinforcement.alias import dashscope_warning

    warning = dashscope_warning()
    if warning:
        typer.secho(warning, fg=typer.colors.YELLOW, err=True)


@shims_app.command("uninstall")
def uninstall(bin_dir: Optional[Path] = BIN) -> None:
    """Remove the commands `rltune shims install` wrote (nothing else)."""
    for name in SHIMS:
        path = _bin(bin_dir) / name
        if path.exists() and _ours(path):
            path.unlink()
            typer.echo(f"removed {path}")
        elif path.exists():
            typer.echo(f"kept {path}: not rltune's")


def register(app: typer.Typer) -> None:
    app.add_typer(shims_app, name="shims")
