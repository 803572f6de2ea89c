"""The Ark-shaped `rl_demo` template: init → test-functions → a short training job, with the
plugins importing `ark_sdk…` unchanged; the rollout in both proxy modes, a @single_grader and
a @group_grader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

RLTUNE = [sys.executable, "-m", "rltune.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "RLTUNE_HOME": str(tmp_path / "home"),
            "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("ark") / "rl-demo"
    res = subprocess.run([*RLTUNE, "init", "workspace", str(ws), "--template", "rl_demo",
                          "--train-rows", "8", "--val-rows", "2"],
                         env=_env(ws.parent), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return ws


def test_init_writes_ark_shaped_workspace(workspace):
    assert (workspace / "plugins" / "calc_rollout.py").is_file()
    row = json.loads((workspace / "data" / "train.jsonl").read_text().splitlines()[0])
    assert set(row) == {"messages", "tools", "extra"} and "answer" in row["extra"]
    job = yaml.safe_load((workspace / "job.yaml").read_text())
    assert job["custom_rl_pipeline"]["rollout"]["plugin"]["python_func"].startswith("plugins.")


@pytest.mark.parametrize("rollout", [
    "plugins.calc_rollout:calc_rollout",
    pytest.param("plugins.raw_rollout:raw_calc_rollout", marks=pytest.mark.slow)])
def test_test_functions_runs_the_plugins(workspace, nano_endpoint, rollout, tmp_path):
    res = subprocess.run(
        [*RLTUNE, "test-functions", "--rollout", rollout,
         "--reward", "plugins.exact_grader:exact_grader",
         "--group-reward", "plugins.answered_grader:answered_grader",
         "--data", "data/val.jsonl", "-n", "2", "--max-tokens", "56",
         "--base-url", nano_endpoint["base_url"], "--api-key", nano_endpoint["api_key"],
         "--model", nano_endpoint["model"], "-o", "json"],
        cwd=workspace, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["rollout"]["succeeded"] == 4, report
    assert report["final_reward"]["count"] == 4, report


@pytest.mark.slow  # about a minute each on a busy 2-core box
@pytest.mark.parametrize("rollout", ["plugins.calc_rollout:calc_rollout",
                                     "plugins.raw_rollout:raw_calc_rollout"])
def test_a_short_job_of_ark_plugins_finishes(workspace, nano_model_dir, rollout, tmp_path):
    job = yaml.safe_load((workspace / "job.yaml").read_text())
    job["model_reference"]["foundation_model"]["name"] = str(nano_model_dir)
    job["hyperparameters"].update(batch_size="2", num_generations="2",
                                  ppo_mini_batch_size="4", num_steps="2",
                                  test_every_n_steps="2", test_num_generations="1",
                                  save_every_n_steps="2")
    job["custom_rl_pipeline"]["rollout"]["plugin"]["python_func"] = rollout
    cfg = workspace / f"job-{rollout.split(':')[1]}.yaml"
    cfg.write_text(yaml.safe_dump(job))
    out = tmp_path / "out"
    res = subprocess.run([*RLTUNE, "train", "-c", str(cfg), "-O", str(out), "--quiet"],
                         cwd=workspace, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr + res.stdout
    assert '"steps": 2' in res.stdout
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    step = next(m["metrics"] for m in metrics if m["step"] == 1)
    assert step["trace/success_rate/agent"] == 1.0, step  # every rollout went through
    assert step["trace/success_rate/reward"] == 1.0, step  # both graders scored them
    assert "trace/reward/exact/mean" in step and "trace/reward/answered/mean" in step
    assert "trace/reward_metrics/answered/answered/mean" in step
    # The proxy's recorded messages are the trajectory, and its tokens were trained on.
    traj = [json.loads(x) for x in
            (out / "trajectories" / "step_000001.jsonl").read_text().splitlines()]
    assert traj and all(t["messages"][-1]["role"] == "assistant" for t in traj)
    assert (out / "checkpoints" / "checkpoint-2").is_dir()


def test_ark_job_py_objects_run_under_the_module_runner(workspace, tmp_path):
    """`python -m rltune.ark script.py` serves the `ark_sdk` imports of an Ark script."""
    script = workspace / "check_job.py"
    text = (workspace / "job.py").read_text().replace(
        "    mcj.submit()\n    print(f\"Job finished. outputs at {mcj.url}\")",
        "    print(mcj.to_job_config('.').to_yaml_text())")
    assert text != (workspace / "job.py").read_text()
    script.write_text(text)
    res = subprocess.run([sys.executable, "-m", "rltune.ark", str(script)], cwd=workspace,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    job = yaml.safe_load(res.stdout)
    assert [f["fcmodel"]["classpath"] for f in job["functions"]] == [
        "plugins.calc_rollout:calc_rollout", "plugins.exact_grader:exact_grader",
        "plugins.answered_grader:answered_grader"]
    assert job["training"]["hyper_parameters"]["max_steps"] == 20


@pytest.mark.slow
def test_submit_of_an_ark_job_py_trains_and_returns_the_summary(workspace, nano_model_dir,
                                                                  tmp_path):
    """`mcj.submit()` runs `rltune train` in a child (the adapter does not import the
    trainer): the job's data and plugins are found in the script's folder, `url` is the job's
    folder and the summary comes back."""
    text = (workspace / "job.py").read_text()
    for old, new in (('name="nano"', f'name="{nano_model_dir}"'),
                     ('"batch_size": "8", "num_generations": "8"',
                      '"batch_size": "2", "num_generations": "2"'),
                     ('"ppo_mini_batch_size": "32"', '"ppo_mini_batch_size": "4"'),
                     ('"num_steps": "20"', '"num_steps": "1"'),
                     ('"test_num_generations": "4"', '"test_num_generations": "1"'),
                     ("    mcj.submit()\n",
                      "    import json\n    print('SUMMARY', json.dumps(mcj.submit()))\n")):
        assert old in text, old
        text = text.replace(old, new)
    (workspace / "submit_job.py").write_text(text)
    res = subprocess.run([sys.executable, "-m", "rltune.ark", "submit_job.py"], cwd=workspace,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    summary = json.loads(res.stdout.split("SUMMARY ", 1)[1].splitlines()[0])
    assert summary["steps"] == 1, summary
    url = Path(res.stdout.split("outputs at ", 1)[1].split()[0])
    assert url.parent == workspace / "runs" and (url / "metrics.jsonl").is_file()
