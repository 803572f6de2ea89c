"""The Bailian CLI guide's defaults against a real local server: register_functions and
test_functions print JSON without -o, `rltune test_functions INSTANCE_ID` works at the top
level (both spellings), and FC_PYPI_LIB gets one "not needed here" note."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rltune_test_server_fixtures import make_workspace


def _cli(ws, *args, env):
    return subprocess.run([sys.executable, "-m", "rltune.cli.main", *args], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=300)


def test_json_default_top_level_test_functions_and_cloud_note(server, tmp_path,
                                                              tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir)
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url,
           "FC_PYPI_LIB": "dashscope-1.25.23-py3-none-any.whl"}
    env.pop("RLTUNE_API_KEY", None)
    r = _cli(ws, "rl", "register_functions", "--reward-classpaths",
             "functions/reward.py:CalcReward", "--no-lazy-load", env=env)
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)  # JSON without -o
    assert r.stderr.count("FC_PYPI_LIB is not needed here") == 1
    reward_in = json.dumps({"func_type": "reward", "ground_truth": "4", "agent_output": {
        "messages": [{"role": "assistant", "content": "4"}]}})
    instance = ids["reward_instance_ids"][0]
    for verb in ("test_functions", "test-functions"):
        r = _cli(ws, verb, instance, "-t", "REWARD", "-i", reward_in, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["status"] == "success"
    r = _cli(ws, "rl", "test_functions", instance, "-t", "REWARD", "-i", reward_in, "-o",
             "yaml", env=env)
    assert r.returncode == 0 and not r.stdout.lstrip().startswith("{")  # -o still chooses
    env.pop("FC_PYPI_LIB")
    r = _cli(ws, "test_functions", instance, "-t", "REWARD", "-i", reward_in, env=env)
    assert "not needed here" not in r.stderr
