"""``agentic_compare.py``'s arguments: a knob of one task is refused for the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "agentic_compare.py"


@pytest.mark.parametrize("args", [["--task", "calc", "--val-rows", "8"],
                                  ["--task", "multihop", "--val-rows", "8"],
                                  ["--task", "multistep", "--val-rows", "0"]])
def test_val_rows_is_refused_off_multistep_and_below_one(args):
    run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert "--val-rows takes a positive number of held-out chains" in run.stderr
