"""Every exception rltune defines is in its error tree (``rltune.sdk.errors``): a class that
derives from a built-in exception also derives from a tree class, so a caller can catch all of
rltune's errors as ``RltuneError`` and the server maps each to its status."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

from rltune.sdk import errors as tree
from rltune.sdk.errors import RltuneError

SRC = Path(__file__).resolve().parents[2] / "src" / "rltune"
BUILTIN_EXCEPTIONS = {n for n, o in vars(builtins).items()
                      if isinstance(o, type) and issubclass(o, BaseException)}
TREE = {n for n, o in vars(tree).items() if isinstance(o, type) and issubclass(o, RltuneError)}


def _exception_classes() -> list[tuple[str, str, list[str]]]:
    """(file, class, base names) of every class in src/rltune with a built-in exception base."""
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                     for b in node.bases]
            if BUILTIN_EXCEPTIONS & set(bases):
                found.append((str(path.relative_to(SRC)), node.name, bases))
    return found


def test_every_exception_class_is_in_the_tree():
    found = _exception_classes()
    assert len(found) >= 5  # the scan sees the classes that keep a built-in base
    outside = [f"{f}: class {name}({', '.join(bases)})" for f, name, bases in found
               if name != "RltuneError" and not TREE & set(bases)]
    assert not outside, ("derive these from a class of rltune.sdk.errors (keeping the built-in "
                         "base if callers catch it):\n" + "\n".join(outside))


@pytest.mark.parametrize("module, name, builtin", [
    ("rltune.config.compat.rowshapes", "RowShapeError", ValueError),
    ("rltune.rollout.scoring", "InvalidReward", ValueError),
    ("rltune.ark.judge", "JudgeError", ValueError),
    ("rltune.functions.http", "WorkerConnectionError", ConnectionError),
    ("rltune.functions.http", "WorkerTimeout", TimeoutError),
])
def test_moved_errors_keep_their_names_and_builtin_bases(module, name, builtin):
    import importlib

    cls = getattr(importlib.import_module(module), name)
    assert cls is getattr(tree, name)
    err = cls("what went wrong")
    assert isinstance(err, RltuneError) and isinstance(err, builtin)
    assert str(err) == "what went wrong" and err.to_dict()["code"] == cls.code
