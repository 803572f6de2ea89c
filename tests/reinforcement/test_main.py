"""``python -m rltune.reinforcement SCRIPT``: a Bailian SDK script runs with ``dashscope…``
served by rltune, and a real ``dashscope`` in the way is named; ``… VERB`` is ``rltune VERB``."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import sys
from dashscope.finetune.reinforcement import AbstractRolloutProcessor
import dashscope
print(AbstractRolloutProcessor.__module__, dashscope.__name__, sys.argv[1:])
"""


def _run(cwd, *args, **env):
    return subprocess.run([sys.executable, "-m", "rltune.reinforcement", *args], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=120)


def test_a_cloud_script_runs_with_rltune_serving_dashscope(tmp_path):
    (tmp_path / "submit.py").write_text(SCRIPT)
    res = _run(tmp_path, "submit.py", "--x", "1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["rltune.sdk.processors", "dashscope", "['--x',", "'1']"]
    assert "warning" not in res.stderr


def test_a_real_dashscope_in_the_way_is_named(tmp_path):
    real = tmp_path / "site" / "dashscope"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")  # a dashscope without finetune: the import fails
    (tmp_path / "submit.py").write_text(SCRIPT)
    res = _run(tmp_path, "submit.py", PYTHONPATH=str(tmp_path / "site"))
    assert res.returncode != 0
    assert "warning: a real dashscope package is installed" in res.stderr, res.stderr
    assert str(real / "__init__.py") in res.stderr and "pip uninstall dashscope" in res.stderr


def test_a_verb_is_the_rltune_command_and_a_missing_script_an_error(tmp_path):
    res = _run(tmp_path, "rl", "--help")
    assert res.returncode == 0 and "register_functions" in res.stdout, res.stderr
    res = _run(tmp_path, "nothere.py")
    assert res.returncode == 2 and "nothere.py is not a file" in res.stderr
