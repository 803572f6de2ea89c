"""Every module's docstring examples run and hold (``python -m doctest`` style), so an example
in the code never drifts from what the code does. The workspace templates are user code, not
modules of the package (their own tests are in ``tests/templates`` and ``tests/ark``)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rltune

MODULES = sorted(m.name for m in pkgutil.walk_packages(rltune.__path__, "rltune.")
                 if not m.name.startswith("rltune.templates."))


def test_the_walk_finds_the_package():
    assert len(MODULES) > 250 and "rltune.safefs" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} docstring example(s) failed (above)"
