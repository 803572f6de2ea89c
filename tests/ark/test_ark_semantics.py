"""Ark's plugin semantics in a real job (tiny model, `rltune train` in a child process):
`PluginContext.phase` is `test` during validation, a plugin that still returns FAILURE after
Ark's retries fails the job (max_plugin_failures 0, configurable), and `enable_trajectory:
false` stores no trajectories, as ENABLE_TRAJECTORY=false does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.config.switches import trajectories_enabled

PLUGIN = '''
import os

import httpx
from ark_sdk.resources.pipeline_plugin import rollout, single_grader
from ark_sdk.types.pipeline_plugin import PluginStatus, RolloutResult


@rollout(name="probe")
async def probe(context, proxy, sample):
    print(f"phase={context.phase} {os.environ['PROBE_TAG']}")  # lands in the job's log
    if (sample.extra or {}).get("fail"):
        return RolloutResult(status=PluginStatus.FAILURE, error="tool backend down")
    messages = [m.to_openai() for m in sample.messages]
    proxy.update_state_from_messages(messages)
    async with httpx.AsyncClient(timeout=300) as http:
        resp = await http.post(proxy.url.rstrip("/") + "/chat/completions",
                               json={"model": sample.model, "messages": messages,
                                     **proxy.get_extra_body()},
                               headers={**proxy.headers,
                                        "Authorization": f"Bearer {proxy.jwt_token}"})
    proxy.process_completion(resp.json())
    return None


@single_grader(name="one")
def one(context, sample, trajectory):
    return 1.0
'''


def _workspace(tmp_path: Path, model_dir: Path, fail_rows: int, **hp) -> Path:
    ws = tmp_path / "ws"
    (ws / "plugins").mkdir(parents=True)
    (ws / "plugins" / "probe.py").write_text(textwrap.dedent(PLUGIN))
    (ws / "data").mkdir()
    rows = [{"messages": [{"role": "user", "content": f"{i}+1?"}],
             "extra": {"answer": str(i + 1), "fail": i < fail_rows}} for i in range(2)]
    (ws / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (ws / "data" / "val.jsonl").write_text(json.dumps(
        {"messages": [{"role": "user", "content": "1+1?"}], "extra": {"answer": "2"}}) + "\n")
    job = {
        "name": "semantics", "customization_type": "GRPO",
        "model_reference": {"foundation_model": {"name": str(model_dir)}},
        "hyperparameters": {"batch_size": "2", "num_generations": "2", "num_steps": "1",
                            "max_new_tokens": "8", "max_prompt_length": "120",
                            "test_num_generations": "1", "max_rollout_retries": "0", **hp},
        "custom_rl_pipeline": {
            "rollout": {"plugin": {"python_func": "plugins.probe:probe",
                                   "envs": {"PROBE_TAG": "probe-env"}}},
            "graders": [{"plugin": {"python_func": "plugins.probe:one"}, "weight": 1}]},
        "data": {"training_set": {"local_files": ["data/train.jsonl"]},
                 "validation_set": {"local_files": ["data/val.jsonl"]}},
        "enable_trajectory": False,
    }
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def _train(ws: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLTUNE_HOME": str(tmp_path / "home")}
    env.pop("ENABLE_TRAJECTORY", None)
    return subprocess.run([sys.executable, "-m", "rltune.cli.main", "train", "-c", "job.yaml",
                           "-O", str(ws / "out"), "--quiet"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=600)


def test_enable_trajectory_false_is_enable_trajectory_env(tmp_path, tiny_model_dir):
    ws = _workspace(tmp_path, tiny_model_dir, 0)
    job = load_job_config(ws / "job.yaml")
    assert not trajectories_enabled(job, environ={})
    hp = job.hyper_parameters
    assert (hp.max_plugin_failures, hp.max_rollout_retries) == (0, 0)  # Ark's rule, retries 0
    text = (ws / "job.yaml").read_text().replace("enable_trajectory: false",
                                                 "enable_trajectory: true")
    (ws / "job.yaml").write_text(text.replace("max_rollout_retries: '0'", "lr: '0.00001'"))
    job = load_job_config(ws / "job.yaml")
    assert trajectories_enabled(job, environ={}) and job.hyper_parameters.max_rollout_retries == 3


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_phase_failure_and_trajectories_in_a_job(tmp_path, tiny_model_dir):
    ws = _workspace(tmp_path, tiny_model_dir, 1)
    res = _train(ws, tmp_path)
    assert res.returncode != 0, res.stdout[-2000:]
    err = res.stderr + res.stdout
    assert "plugin FAILURE" in err and "max_plugin_failures 0" in err, err[-3000:]
    assert "tool backend down" in err
    log = (ws / "out" / "train.log").read_text()
    phases = [line.split("phase=")[1].split()[0] for line in log.splitlines()
              if "phase=" in line and "probe-env" in line]
    assert phases[0] == "test" and "train" in phases, phases  # validation, then step 1
    assert not list((ws / "out").glob("trajectories/*.jsonl"))
    # Ark's console names next to ours (item 6): the validation before step 1 and step 1
    steps = {m["step"]: m["metrics"] for m in map(
        json.loads, (ws / "out" / "metrics.jsonl").read_text().splitlines())}
    assert steps[0]["test/reward->final_reward.mean"] == \
        steps[0]["validation/data/reward/mean@1"]
    assert steps[1]["train/reward->final_reward.mean"] == steps[1]["critic/rewards/mean"]


@pytest.mark.slow
def test_a_raised_max_plugin_failures_lets_the_job_finish(tmp_path, tiny_model_dir):
    ws2 = _workspace(tmp_path / "again", tiny_model_dir, 1, max_plugin_failures="5")
    res = _train(ws2, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
