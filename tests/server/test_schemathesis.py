"""Property-based runs of schemathesis against the live OpenAPI spec: no route answers 5xx.

The default run fuzzes every write route (POST and DELETE) with a few examples each; the
``slow`` run tries every route with more examples and every phase."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("schemathesis")


def run_schemathesis(location: str, *args: str, cwd: Path, timeout: int = 900) -> None:
    """``schemathesis run`` checking ``not_a_server_error``; fails the test with its report."""
    exe = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    proc = subprocess.run(
        [exe, "run", location, "--checks", "not_a_server_error", "--seed", "1",
         "--workers", "1", "--generation-database", "none", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_write_routes_answer_no_5xx(server, tmp_path):
    run_schemathesis(f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {server.key}",
                     "--max-examples", "5", "--phases", "examples,fuzzing",
                     "--include-method", "POST", "--include-method", "DELETE", cwd=tmp_path)


@pytest.mark.slow
def test_no_5xx_on_generated_requests(server, tmp_path):
    run_schemathesis(f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {server.key}",
                     "--max-examples", "25", "--exclude-path-regex", "logs/stream",
                     cwd=tmp_path)
