"""`rltune test-functions` single mode (``rltune.functions.harness``) and the function
registry's CLI: one input through a classpath or a loaded instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import WIRE, WS
from rltune.functions.harness import run_single

RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


async def test_single_mode():
    out = await run_single(json.loads((WIRE / "reward_input.json").read_text()),
                           classpath="functions.cloud_reward.CalcReward", workspace=WS)
    assert out.reward.reward_score == pytest.approx(1.0)



def test_cli_register_load_and_test_an_instance(tmp_path):
    env = {**os.environ, "RLTUNE_HOME": str(tmp_path / "home")}
    ent = subprocess.run([*RLTUNE, "functions", "register", "-c", "functions.behave.Behave",
                          "-t", "rollout", "-w", str(WS)], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ent.returncode == 0, ent.stderr
    entity_id = ent.stdout.strip()
    assert entity_id.startswith("ro-")
    loader = subprocess.Popen([*RLTUNE, "functions", "load", entity_id], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        instance_id, url = loader.stdout.readline().split()
        assert instance_id.startswith("ro-ins-") and url.endswith("/api/v1")
        inp = json.dumps({"messages": [{"role": "user", "content": "yo"}],
                          "model_resource": {"model_name": "m", "base_url": "u", "api_key": "k"}})
        out = subprocess.run([*RLTUNE, "test-functions", "--instance", instance_id, "-i", inp,
                              "-o", "json"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["agent_output"]["messages"][-1]["content"] == "echo yo"
    finally:
        loader.terminate()
        loader.wait(timeout=15)
    listing = subprocess.run([*RLTUNE, "functions", "list", "-o", "json"], env=env,
                             capture_output=True, text=True, timeout=60)
    data = json.loads(listing.stdout)
    assert data["functions"][0]["id"] == entity_id
    assert data["instances"][0]["status"] == "stopped"

