"""``rltune serve`` as a real process, reached with the openai client."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import openai
import pytest

from rltune.models.registry import resolve_model as resolve_model_path
from rltune.sdk.errors import NotFoundError


def test_resolve_model_path(tmp_path, monkeypatch, tiny_model_dir):
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path))
    assert resolve_model_path(str(tiny_model_dir)) == tiny_model_dir
    shutil.copytree(tiny_model_dir, tmp_path / "models" / "mine")
    assert resolve_model_path("mine") == tmp_path / "models" / "mine"
    with pytest.raises(NotFoundError, match="known names: mine"):
        resolve_model_path("nope")


def start_serve(args: list[str], env: dict) -> tuple[subprocess.Popen, str]:
    """``rltune serve ARGS --port 0`` as a process, and its base URL once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltune.cli.main", "serve", *args, "--port", "0",
         "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**env, "OMP_NUM_THREADS": "1"})
    deadline, url, seen = time.time() + 90, None, []
    while time.time() < deadline and url is None:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        url = m.group(1) if m else None
    if url is None:
        proc.terminate()
        proc.wait(timeout=30)
        raise AssertionError("".join(seen))
    return proc, url


def test_serve_process_answers_with_key(tmp_path, tiny_model_dir):
    home = tmp_path / "home"
    shutil.copytree(tiny_model_dir, home / "models" / "tiny")
    proc, url = start_serve(["tiny", "--api-key", "sk-test"],
                            {**os.environ, "RLTUNE_HOME": str(home)})
    try:
        client = openai.OpenAI(base_url=url, api_key="sk-test")
        r = client.chat.completions.create(model="tiny", max_tokens=4, messages=[
            {"role": "user", "content": "hi"}])
        assert r.model == "tiny" and r.usage.completion_tokens > 0
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="wrong").models.list()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_of_a_hub_id_serves_it_under_that_id(hf_home):
    """A hub id resolves to a snapshot folder named by its hash; the model is still served
    (and requests name it) as the id the user gave."""
    from rltune.cli.serve_cmd import served_model_name

    proc, url = start_serve(["acme/qwen-standin"], dict(os.environ))
    try:
        client = openai.OpenAI(base_url=url, api_key="none")
        assert [m.id for m in client.models.list()] == ["acme/qwen-standin"]
        r = client.chat.completions.create(model="acme/qwen-standin", max_tokens=2, messages=[
            {"role": "user", "content": "hi"}])
        assert r.model == "acme/qwen-standin"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    snapshot = resolve_model_path("acme/qwen-standin")
    assert served_model_name(str(snapshot)) == snapshot.name  # a folder: its name


def test_serve_refuses_bad_chat_template_kwargs_before_loading(tiny_model_dir):
    from typer.testing import CliRunner

    from rltune.cli.main import app

    result = CliRunner().invoke(app, ["serve", str(tiny_model_dir),
                                      "--chat-template-kwargs", "[1]"])
    assert result.exit_code == 2
    assert "--chat-template-kwargs is not a JSON object: [1]" in result.output


def test_serve_on_a_cpu_torch_refuses_cuda_without_a_traceback(tiny_model_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = subprocess.run([sys.executable, "-m", "rltune.cli.main", "serve",
                          str(tiny_model_dir), "--port", "0", "--device", "cuda"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert "--device cuda" in res.stderr and "CUDA" in res.stderr, res.stderr


def test_serve_dtype_and_device_names():
    from rltune.cli.serve_cmd import check_device_dtype
    from rltune.sdk.errors import ValidationError

    assert check_device_dtype("cpu", "bf16") == "bfloat16"
    assert check_device_dtype("cpu", "float32") == "float32"
    with pytest.raises(ValidationError, match="unknown dtype 'bf17'"):
        check_device_dtype("cpu", "bf17")
    with pytest.raises(ValidationError, match="unknown device 'tpu'"):
        check_device_dtype("tpu", "float32")
