"""The ``rltune`` command line. Each command group lives in its own module of this package."""

from __future__ import annotations

import importlib
import os

import typer

from rltune.cli.help_format import ReadableGroup

# The Hugging Face hub is contacted only to download a hub id (org/name) that a job or command
# names and the HF cache lacks (rltune.models.registry.resolve_model); every load after that is
# from a local directory. HF_HUB_OFFLINE=1 turns downloads off: a missing model is then an error.
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

app = typer.Typer(
    name="rltune",
    cls=ReadableGroup,  # TEXT / PATH / a|b metavars, none on a flag (help_format.py)
    help="Self-hosted reinforcement-learning fine-tuning of LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# (module, attribute): each module defines ``register(app)`` that adds its commands. Importing
# lazily keeps `rltune --help` fast and lets each group pull heavy imports only when it runs.
_GROUPS = ("models_cmd", "functions_cmd", "serve_cmd", "train_cmd", "init_cmd", "server_cmd",
           "rl_cmd", "jobops_cmd", "console_cmd", "doctor_cmd", "data_cmd", "lifecycle_cmd",
           "config_cmd", "ark_cmd", "shims_cmd")


def _register_groups() -> None:
    for name in _GROUPS:
        try:
            module = importlib.import_module(f"rltune.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"rltune.cli.{name}":
                continue
            raise
        module.register(app)


def _print_version(value: bool) -> None:
    if value:
        from rltune import __version__

        typer.echo(f"rltune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(False, "--version", "-V", is_eager=True,
                                  callback=_print_version, help="print rltune's version and exit"),
) -> None:
    """Self-hosted reinforcement-learning fine-tuning of LLM agents. Exit codes: 0 ok, 1 failed,
    2 usage error, 3 doctor alerts, 4 no server answers (docs/cli.md)."""
    from rltune.cli.cloud_env import cloud_only_note

    note = cloud_only_note()  # FC_PYPI_LIB and other cloud-only variables: one line
    if note:
        typer.secho(note, err=True, fg="yellow")


@app.command()
def version() -> None:
    """Print rltune's version."""
    from rltune import __version__

    typer.echo(__version__)


_register_groups()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
