"""Checks made before anything slow, each through a real ``rltune`` process: ``serve`` on a
busy port and a missing dataset (``train``, ``run``, ``upload-data``) exit 2 (USAGE) at once,
before weights load or a server starts; with no server running and no key, a command says the
server is not running (exit 4), not "no API key"."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rltune.cli import exit_codes
from rltune.cli.preflight import check_port_free
from rltune.sdk.errors import ValidationError
from rltune.templates import create_workspace

RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


def rltune(*args, home: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("RLTUNE_API_KEY", "DASHSCOPE_API_KEY", "RLTUNE_BASE_URL")}
    started = time.monotonic()
    res = subprocess.run([*RLTUNE, *map(str, args)], capture_output=True, text=True,
                         timeout=300, env={**clean, "RLTUNE_HOME": str(home), **env})
    return res, time.monotonic() - started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_port_free_names_the_option_and_passes_a_free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        with pytest.raises(ValidationError) as err:
            check_port_free("127.0.0.1", s.getsockname()[1])
    assert err.value.where == "--port" and "--port 0" in str(err.value)
    check_port_free("127.0.0.1", free_port())
    check_port_free("127.0.0.1", 0)


def test_serve_on_a_busy_port_exits_2_before_loading_the_weights(tmp_path, tiny_model_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res, took = rltune("serve", tiny_model_dir, "--port", port, "--device", "cpu",
                           home=tmp_path)
    assert res.returncode == exit_codes.USAGE, res.stderr
    assert f"127.0.0.1:{port}" in res.stderr and "--port" in res.stderr, res.stderr
    assert "serving" not in res.stdout and "Loading weights" not in res.stderr, res.stderr
    assert took < 30, took


@pytest.fixture
def workspace(tmp_path, tiny_model_dir) -> Path:
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=8, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["datasets"][0]["file_name"] = "data/missing.jsonl"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def test_train_with_a_missing_dataset_exits_2_before_a_run_starts(workspace, tmp_path):
    res, _ = rltune("train", "-c", workspace / "job.yaml", home=tmp_path / "home")
    assert res.returncode == exit_codes.USAGE, res.stderr
    assert "datasets[0].file_name" in res.stderr and "missing.jsonl" in res.stderr, res.stderr
    assert not (workspace / "runs").exists()  # no run folder, no banner
    assert "━" not in res.stdout + res.stderr


def test_run_with_a_missing_dataset_exits_2_before_a_server_starts(workspace, tmp_path):
    home = tmp_path / "home"
    url = f"http://127.0.0.1:{free_port()}"
    res, _ = rltune("run", "-c", workspace / "job.yaml", "--no-follow", home=home,
                    RLTUNE_BASE_URL=url)
    assert res.returncode == exit_codes.USAGE, res.stderr
    assert "datasets[0].file_name" in res.stderr and "missing.jsonl" in res.stderr, res.stderr
    assert "starting a local one" not in res.stderr
    assert not (home / "server" / "server.json").exists()
    res, _ = rltune("upload-data", "--training-files", tmp_path / "nope.jsonl", home=home,
                    RLTUNE_BASE_URL=url)
    assert res.returncode == exit_codes.USAGE and "--training-files" in res.stderr, res.stderr
    assert not (home / "server" / "server.json").exists()


def test_no_server_running_is_said_so_not_no_api_key(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens; no key, no local server ran
    for args in (["list"], ["get", "ft-x"], ["models", "published"]):
        res, _ = rltune(*args, home=tmp_path, RLTUNE_BASE_URL=url)
        assert res.returncode == exit_codes.UNREACHABLE, (args, res.stderr)
        assert f"no rltune server is running at {url}" in res.stderr, res.stderr
        assert "rltune server start" in res.stderr and "no API key" not in res.stderr


def test_hyper_parameters_that_are_not_json_exit_2_before_any_request(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: a request would exit 4
    res, _ = rltune("submit", "--model", "nano", "--training-file-ids", "file-x",
                    "--hyper-parameters", "{batch_size: 4", home=tmp_path, RLTUNE_BASE_URL=url,
                    RLTUNE_API_KEY="sk-x")
    assert res.returncode == exit_codes.USAGE, res.stderr
    assert "--hyper-parameters is not JSON" in res.stderr, res.stderr
