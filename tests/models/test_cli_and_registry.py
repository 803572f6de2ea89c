"""`rltune models ...` commands and the model registry (real subprocesses, real files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from rltune.models.registry import ensure_demo_model, list_models, models_home, resolve_model
from rltune.sdk.errors import NotFoundError, ValidationError


def _rltune(*args, home):
    env = {**os.environ, "RLTUNE_HOME": str(home), "OMP_NUM_THREADS": "1", "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "rltune.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_home_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "h"))
    assert models_home() == tmp_path / "h" / "models"
    assert models_home(tmp_path / "x") == tmp_path / "x" / "models"
    assert list_models() == []


def test_cached_model_is_reused_and_listed(tmp_path, tiny_model_dir):
    dest = models_home(tmp_path) / "nano"
    shutil.copytree(tiny_model_dir, dest)
    assert ensure_demo_model("nano", home=tmp_path) == dest  # no rebuild: returns at once
    assert resolve_model("nano", tmp_path) == dest
    assert resolve_model(str(dest)) == dest
    rows = list_models(tmp_path)
    assert [(r["name"], r["size"]) for r in rows] == [("nano", "tiny")]


def test_unknown_model_and_size_errors(tmp_path):
    with pytest.raises(NotFoundError, match="no model 'nope'"):
        resolve_model("nope", tmp_path)
    with pytest.raises(ValidationError, match="no warm-start recipe"):
        ensure_demo_model("huge", home=tmp_path)


def test_cli_chat_runs_the_agent_on_a_model_dir(tmp_path, tiny_model_dir):
    proc = _rltune("models", "chat", str(tiny_model_dir), "What is 23 + 45?", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "What is 23 + 45?" in proc.stdout and "answer:" in proc.stdout


def test_cli_list_and_bad_size(tmp_path, tiny_model_dir):
    shutil.copytree(tiny_model_dir, models_home(tmp_path) / "tiny-copy")
    proc = _rltune("models", "list", home=tmp_path)
    assert proc.returncode == 0 and "tiny-copy" in proc.stdout
    bad = _rltune("models", "build-demo", "--size", "huge", home=tmp_path)
    assert bad.returncode != 0 and "no warm-start recipe" in bad.stdout + bad.stderr
    missing = _rltune("models", "chat", "nope", "hi", home=tmp_path)
    assert missing.returncode == 2 and "no model 'nope'" in missing.stdout
    assert json.loads((tiny_model_dir / "rltune_model.json").read_text())["size"] == "tiny"


@pytest.mark.slow  # ~15-40 s: a real build started and killed at its first progress line
def test_build_prints_progress_lines_without_a_terminal(tmp_path):
    """Piped (CI logs), the build prints plain lines from its first step on."""
    import os
    import re
    import subprocess
    import sys
    import time

    env = {**os.environ, "RLTUNE_HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rltune.cli.main", "models", "build-demo",
                             "--size", "nano", "--home", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if re.match(r"nano: step \d+/\d+ .*loss \d", line):
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert any(re.match(r"nano: step \d+/\d+ .*loss \d", s) for s in seen), seen
    assert not any("\x1b[" in s for s in seen), seen  # no terminal control codes
