"""Readable ``--help`` for every command: metavars in click's plain style (``TEXT``,
``INTEGER``, ``PATH``, ``table|json|yaml``, an argument by its ``NAME``), none on a flag, and
"repeatable" on an option that may be given more than once.

Typer's own display (``<str>``, ``<bool>``, ``<list[str]>``) names Python types; the root
group of ``rltune`` (:class:`ReadableGroup`) rewrites each parameter of the whole command tree
once, when typer builds it, so a command needs no ``metavar=`` of its own (one it sets wins).
"""

from __future__ import annotations

from typing import Any, get_args, get_origin

import typer
from typer.core import TyperGroup

_NAMES = {int: "INTEGER", float: "NUMBER", bool: "BOOLEAN", str: "TEXT"}
_CLICK_NAMES = {"integer": "INTEGER", "float": "NUMBER", "boolean": "BOOLEAN", "path": "PATH",
                "filename": "FILE", "choice": "CHOICE"}


def _choices(param: Any) -> list[str]:
    desc = getattr(param, "type_descriptor", None)
    choices = getattr(desc, "choices", None) if desc is not None else None
    if choices is None:  # typer on click: a click.Choice
        choices = getattr(getattr(param, "type", None), "choices", None)
    return [str(getattr(c, "value", c)) for c in choices or ()]


def _type_name(param: Any) -> str:
    desc = getattr(param, "type_descriptor", None)
    if desc is None:  # typer on click: the click ParamType's name
        name = getattr(getattr(param, "type", None), "name", "text")
        return _CLICK_NAMES.get(name, "TEXT")
    if getattr(desc, "is_path", False):
        return "PATH"
    annotation = desc.annotation
    if get_origin(annotation) in (list, tuple):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        annotation = args[0] if args else str
    return _NAMES.get(annotation, "TEXT")


def metavar(param: Any) -> str:
    """The metavar shown for ``param``: '' for a flag, the choices, the argument's name, or
    the value's kind."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    choices = _choices(param)
    if choices:
        return "|".join(choices)
    if getattr(param, "param_type_name", "") == "argument":
        return (param.name or "value").upper()
    return _type_name(param)


def _tidy(params: list[Any]) -> None:
    for param in params:
        if param.metavar is not None:
            continue  # set by the command, or tidied already
        param.metavar = metavar(param)
        if getattr(param, "param_type_name", "") == "argument":
            # the name column shows the metavar already; no second type column
            param.display_type_rich = lambda ctx: None
        if getattr(param, "multiple", False) and param.help and "repeat" not in param.help:
            param.help = f"{param.help} (repeatable)"


def tidy_params(command: Any, ctx: Any) -> None:
    """Set the metavar (and "repeatable") of each parameter of ``command``, its help option
    and every subcommand, recursively; a metavar a command set itself is kept."""
    _tidy(command.get_params(ctx))
    for name, sub in getattr(command, "commands", {}).items():
        tidy_params(sub, typer.Context(sub, info_name=name, parent=ctx))


class ReadableGroup(TyperGroup):
    """The root group: tidies the metavars of the whole tree once it is built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy_params(self, typer.Context(self, info_name=self.name))

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _tidy(params)  # typer adds --install-completion after __init__
        return params
