"""``rltune shims install``: the optional ``dashscope`` and ``ark`` commands forward to rltune,
and never replace a command rltune did not write."""

from __future__ import annotations

import subprocess

from typer.testing import CliRunner

from rltune.cli.main import app


def test_the_shims_forward_to_rltune(tmp_path):
    bin_dir = tmp_path / "bin"
    res = CliRunner().invoke(app, ["shims", "install", "--bin", str(bin_dir)])
    assert res.exit_code == 0, res.output
    out = subprocess.run([str(bin_dir / "dashscope"), "rl", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Usage: dashscope rl" in out.stdout and "register_functions" in out.stdout
    out = subprocess.run([str(bin_dir / "ark"), "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "Usage: rltune ark" in out.stdout, out.stderr


def test_a_real_command_is_never_replaced_and_uninstall_removes_only_ours(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = bin_dir / "dashscope"
    real.write_text("#!/bin/sh\n# the dashscope package's own command\n")
    res = CliRunner().invoke(app, ["shims", "install", "--bin", str(bin_dir)])
    assert res.exit_code == 1
    assert f"{real} exists and is not rltune's" in res.output
    assert "the dashscope package's own command" in real.read_text()
    assert (bin_dir / "ark").is_file()  # the other one was written
    res = CliRunner().invoke(app, ["shims", "install", "--bin", str(bin_dir)])
    assert res.exit_code == 1 and "wrote" in res.output  # ours is rewritten, the real one not
    res = CliRunner().invoke(app, ["shims", "uninstall", "--bin", str(bin_dir)])
    assert res.exit_code == 0, res.output
    assert real.is_file() and not (bin_dir / "ark").exists()
    assert f"kept {real}: not rltune's" in res.output
