"""A short demo-model recipe for build tests, in process and through the real CLI.

Two phases on the ``tiny`` shape (batches of 4, 4 evaluation episodes, 1 thread): copy until
step 40 (its first evaluation, where the tool path "qualifies" at once), then the mix phase
until step 50 (an always-reachable band). Seconds, where the nano recipe takes minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rltune.models.recipes import Recipe
from rltune.models.tasks import TaskConfig
from rltune.models.warmstart import WarmStartConfig

SHORT = dict(task=TaskConfig(digits=1, heldout_percent=30), batch_size=4, eval_episodes=4,
             threads=1, max_steps=80, eval_every=40, min_tool_accuracy=0.0,
             min_tool_episodes=0, mix_tool_fraction=0.3, mix_eval_every=10, mix_max_steps=20,
             band=(0.0, 1.0))


def short_recipe(**kw) -> Recipe:
    return Recipe("tiny", WarmStartConfig(**{**SHORT, **kw}), copy_gain=0.3)


_DRIVER = """
import sys
from rltune.models import recipes
from rltune.models.recipes import Recipe
from rltune.models.tasks import TaskConfig
from rltune.models.warmstart import WarmStartConfig
recipes.RECIPES["tiny"] = Recipe("tiny", WarmStartConfig(KW), copy_gain=0.3)
from rltune.cli.main import main
sys.argv = ["rltune", "models", "build-demo", "--size", "tiny", "--home", sys.argv[1]]
main()
"""


def cli_build(home: Path, **kw) -> subprocess.Popen:
    """``rltune models build-demo --size tiny`` with ``short_recipe(**kw)`` as the tiny recipe,
    in a child process whose stdout and stderr are pipes (as in CI)."""
    args = {**SHORT, **kw}
    body = ", ".join(f"{k}={v!r}" for k, v in args.items() if k != "task")
    code = _DRIVER.replace("KW", f"task=TaskConfig(digits=1, heldout_percent=30), {body}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RLTUNE_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-c", code, str(home)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
