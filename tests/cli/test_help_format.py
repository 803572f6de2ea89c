"""Every ``rltune`` command, option and argument has help text, and ``--help`` shows readable
metavars (TEXT, PATH, table|json|yaml; nothing on a flag), never typer's ``<bool>`` /
``<list[str]>``: the test walks the whole command tree as typer builds it."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from rltune.cli.help_format import metavar
from rltune.cli.main import app


def _tree() -> list[tuple[str, object, list]]:
    """(path, command, params with the help option) for every command, groups included."""
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path: list[str], ctx) -> None:
        out.append((" ".join(path), cmd, cmd.get_params(ctx)))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name], typer.Context(sub, info_name=name, parent=ctx))

    walk(root, ["rltune"], typer.Context(root, info_name="rltune"))
    return out


def test_every_command_option_and_argument_has_help():
    tree = _tree()
    assert len(tree) > 80  # the walk reaches the nested groups (rl, models, ark …)
    missing = [f"{path}: command" for path, cmd, _ in tree if not (cmd.help or cmd.short_help)]
    missing += [f"{path} {p.opts[0] if p.opts else p.name}" for path, _, params in tree
                for p in params if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"{len(missing)} without help text:\n" + "\n".join(missing)


def test_metavars_are_readable():
    for path, _, params in _tree():
        for p in params:
            shown = p.metavar
            assert shown is not None and not re.search(r"[<>\[\]]", shown), (path, p.name, shown)
            if getattr(p, "is_flag", False):
                assert shown == "", (path, p.name)


def test_help_pages_show_no_python_type_names():
    runner = CliRunner()
    for args in (["rl", "run"], ["list"], ["serve"], ["models", "export"], ["logs"]):
        res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        for bad in ("<bool>", "<str>", "<int>", "list[", "<path>"):
            assert bad not in res.output, (args, bad)
    out = runner.invoke(app, ["list", "--help"], env={"COLUMNS": "200"}).output
    assert "table|json|yaml" in out and "INTEGER" in out
    out = runner.invoke(app, ["get", "--help"], env={"COLUMNS": "200"}).output
    assert "JOB_ID" in out


def test_a_repeatable_option_says_so():
    (run,) = [cmd for path, cmd, _ in _tree() if path == "rltune rl run"]
    tag = next(p for p in run.params if p.name == "reward_weights")
    assert tag.help.endswith("(repeatable)") and metavar(tag) == "TEXT"
