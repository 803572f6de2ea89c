"""CLI conventions (issue 32): ``rltune --version``; distinct exit codes from one place
(0 ok, 1 the job failed, 2 usage, 4 no server answers), each from a real process; choices in
``--help``; no third-party INFO lines (httpx's ``HTTP Request: …``) on the terminal or in a
job log, while the user's own ``print`` and loggers stay. A real failed job's exit code (1) and
its job log are checked in test_init_and_train_cmd.py
(``test_a_job_whose_steps_have_no_successful_rollout_fails``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from rltune import __version__
from rltune.cli import exit_codes

RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


def rltune(*args: str, env: dict | None = None, cwd: Path | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*RLTUNE, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


def test_version_flag_and_command():
    for flag in ("--version", "-V"):
        res = rltune(flag)
        assert res.returncode == 0 and res.stdout.strip() == f"rltune {__version__}", res
    assert rltune("version").stdout.strip() == __version__


def test_the_exit_codes_are_distinct_and_documented():
    codes = [exit_codes.OK, exit_codes.FAILED, exit_codes.USAGE, exit_codes.ALERTS,
             exit_codes.UNREACHABLE]
    assert codes == [0, 1, 2, 3, 4]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for name in ("OK", "FAILED", "USAGE", "ALERTS", "UNREACHABLE"):
        assert f"| {getattr(exit_codes, name)} | `{name}`" in doc, name


def test_a_usage_error_exits_2(tmp_path):
    assert rltune("train", "-c", tmp_path / "missing.yaml").returncode == exit_codes.USAGE
    bad = tmp_path / "job.yaml"
    bad.write_text("model: {name: nano}\nno_such_key: 1\n")
    res = rltune("train", "-c", bad)
    assert res.returncode == exit_codes.USAGE and "no_such_key" in res.stderr, res.stderr
    assert rltune("list", "-o", "xml").returncode == exit_codes.USAGE


def test_no_server_exits_4_without_third_party_log_lines(tmp_path):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = rltune("list", "-o", "json", env={"RLTUNE_BASE_URL": f"http://127.0.0.1:{port}",
                                            "RLTUNE_API_KEY": "sk-x",
                                            "RLTUNE_HOME": str(tmp_path)})
    assert res.returncode == exit_codes.UNREACHABLE, res.stderr
    assert "cannot reach the rltune server" in res.stderr
    assert "httpx" not in res.stderr and "HTTP Request" not in res.stderr


def test_choices_are_shown_in_help():
    out = rltune("list", "--help", env={"COLUMNS": "200"}).stdout
    assert "table|json|yaml" in out
    out = rltune("serve", "--help", env={"COLUMNS": "200"}).stdout
    assert "auto" in out and "bfloat16" in out
