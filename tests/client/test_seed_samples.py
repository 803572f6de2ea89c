"""The Bailian docs' own sample code against a real rltune server (issue 14 acceptance).

``seeds/submit_job.py`` is the demo's submit script verbatim (run under the ``dashscope``
alias); the other calls are the cloud docs' snippets with ``dashscope`` → the alias (or the
CLI name ``dashscope`` → ``rltune``). Only data the docs leave to the user is ours: the
workspace's function files, the data files, small runtimes (the docs' capacity 30 would start
30 workers per function). Jobs use the docs' model names: the server refuses a model it does
not have at submit, so each test gives it a weightless stand-in (a config.json only) under
that name; such a job fails fast once started; the server runs one at a time, the rest stay
PENDING.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rltune.sdk.errors import ConflictError

SEEDS = Path(__file__).parent / "seeds"


@pytest.fixture(autouse=True)
def docs_model_names(server_home):
    """The docs' model names exist on the server (config only: a started job fails fast)."""
    for name in ("qwen3.5-9b", "m"):
        model = server_home / "models" / name
        model.mkdir(parents=True)
        (model / "config.json").write_text('{"model_type": "qwen2"}')
PROCESSORS = '''
from dashscope.finetune.reinforcement import (AbstractRewardProcessor, AbstractRolloutProcessor,
    AbstractGroupRewardProcessor, AgentOutput, GroupReward, GroupRewardOutput, Reward,
    RewardOutput, RolloutOutput)


class {rollout}(AbstractRolloutProcessor):
    async def process(self, input):
        return RolloutOutput(agent_output=AgentOutput(messages=input.messages))


class {reward}(AbstractRewardProcessor):
    def process(self, input):
        return RewardOutput(reward=Reward(reward_score=1.0, reward_metrics={{"accuracy": 1.0}}))


class {group}(AbstractGroupRewardProcessor):
    async def process(self, input):
        return GroupRewardOutput(reward=GroupReward(
            rewards=[Reward(reward_score=0.5) for _ in input.agent_outputs]))
'''
DOC_YAML = """
job_name: "agentic-rl"
workspace_dir: "./"
model: "qwen3.5-9b"
mode: "reinforcement"
datasets:
  - type: "training"
    data_source_type: "file_id"
    file_name: "./data/calc_train_min.jsonl"
  - type: "validation"
    data_source_type: "file_id"
    file_name: "./data/calc_validation_min.jsonl"
functions:
  - type: "rollout"
    name: "rollout-1"
    timeout: 600
    fcmodel: {classpath: "functions.rollout.rollout.CalcXRolloutProcessor"}
    runtime: {cpu: 1, concurrency: 2, capacity: 1, min_capacity: 1, max_capacity: 1, env: {}}
  - type: "reward"
    name: "rewards-1"
    weight: 1.0
    timeout: 120
    reward_metric_weight: {reward_metric_weightA: 0.3, reward_metric_weightB: 0.7}
    fcmodel: {classpath: "functions.reward.reward.DemoRewardProcessor"}
    runtime: {cpu: 1, concurrency: 2, capacity: 1, min_capacity: 1, max_capacity: 1, env: {}}
training:
  hyper_parameters: {algorithm: "gspo", batch_size: 64, eval_steps: 1, kl_loss_coef: 0.002,
                     learning_rate: 2e-6, lr_scheduler_type: "linear", max_length: 8192,
                     n_epochs: 1, n_rollouts: 8, ppo_mini_batch_size: 8, save_steps: 100,
                     save_strategy: "epoch", save_total_limit: 1}
  resources: {charge_type: "mtu_postpaid", mtu_spec_code: "MTU4", mtu_capacity: 24}
"""


def make_workspace(root: Path) -> Path:
    """The demo's layout: functions/{rollout,reward}/…, data/calc_*_min.jsonl, job.yaml."""
    ws = root / "agentic-rl-example"
    for sub, names in (("rollout", ("rollout", "rollout_only")),
                       ("reward", ("reward", "group_reward"))):
        (ws / "functions" / sub).mkdir(parents=True)
        for name in names:
            (ws / "functions" / sub / f"{name}.py").write_text(PROCESSORS.format(
                rollout="CalcXRolloutProcessor" if name == "rollout" else "DemoRolloutProcessor",
                reward="DemoRewardProcessor", group="DemoGroupRewardProcessor"))
    (ws / "functions" / "__init__.py").write_text("")
    (ws / "data").mkdir()
    row = {"messages": [{"role": "user", "content": "6.6 minus x (3/2) times equals 5.6."}],
           "rollout_extra": {"solution": "2/3"}}
    for name, n in (("calc_train_min.jsonl", 64), ("calc_validation_min.jsonl", 4)):
        (ws / "data" / name).write_text((json.dumps(row) + "\n") * n)
    (ws / "job.yaml").write_text(DOC_YAML)
    (ws / "requirements.txt").write_text("")
    return ws


def env_for(server) -> dict[str, str]:
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url,
           "DASHSCOPE_API_KEY": server.key}  # the docs' variable
    env.pop("RLTUNE_API_KEY", None)
    return env


def test_submit_job_script_runs_unchanged(server, tmp_path):
    ws = make_workspace(tmp_path)
    shutil.copy(SEEDS / "submit_job.py", ws / "submit_job.py")
    boot = ("from rltune.reinforcement import install_as_dashscope; install_as_dashscope(); "
            "import runpy; runpy.run_path('submit_job.py', run_name='__main__')")
    env = env_for(server)
    (server.home / "server" / "admin.key").rename(server.home / "admin.key.moved")
    try:  # the key can only come from DASHSCOPE_API_KEY
        proc = subprocess.run([sys.executable, "-c", boot], cwd=ws, env=env,
                              capture_output=True, text=True, timeout=180)
    finally:
        (server.home / "admin.key.moved").rename(server.home / "server" / "admin.key")
    assert proc.returncode == 0, proc.stderr
    assert "训练任务已提交，Job ID: ft-" in proc.stdout, proc.stdout + proc.stderr
    job_id = proc.stdout.split("Job ID: ")[1].split()[0]
    with server.client() as c:
        job = c.get(f"/v1/fine-tunes/{job_id}").json()
        cfg = job["config"]
        assert cfg["model"]["name"] == "qwen3.5-9b"
        assert [f["name"] for f in cfg["functions"]] == ["rollout-1", "reward-1"]
        assert cfg["functions"][1]["reward_metric_weight"] == {"accuracy": 0.7, "format": 0.3}
        assert cfg["training"]["hyper_parameters"]["batch_size"] == 64
        assert len(job["training_file_ids"]) == len(job["validation_file_ids"]) == 1


def test_doc_client_calls(server, tmp_path, monkeypatch):
    from rltune.reinforcement import install_as_dashscope

    ws = make_workspace(tmp_path)
    monkeypatch.chdir(ws)
    for k, v in env_for(server).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    assert install_as_dashscope()
    from dashscope.finetune.agentic_rl import (
        AgenticRL,
        AgenticRLFunctionComponent,
        FunctionComponentModel,
        FunctionType,
    )
    from dashscope.finetune.reinforcement import FunctionComponentRuntime

    async def flow() -> dict:
        out: dict = {}
        # seed 004, register_functions (lazy_load=False to test them)
        rl = AgenticRL()
        (rollout_eids, reward_eids, group_eids,
         rollout_iids, reward_iids, group_iids) = await rl.register_functions(  # noqa: RUF059
            functions=[
                AgenticRLFunctionComponent(
                    type=FunctionType.ROLLOUT,
                    fcmodel=FunctionComponentModel(
                        zipdir='./',
                        classpath="functions.rollout.rollout_only.DemoRolloutProcessor"),
                    runtime=FunctionComponentRuntime(capacity=1, max_capacity=1)),
                AgenticRLFunctionComponent(
                    type=FunctionType.REWARD,
                    fcmodel=FunctionComponentModel(
                        classpath="functions/reward/reward.py:DemoRewardProcessor"),
                    runtime=FunctionComponentRuntime(capacity=1, max_capacity=1)),
            ],
            lazy_load=False)
        out["ids"] = (rollout_eids, reward_eids, group_eids, rollout_iids, reward_iids)
        # seed 004, test_functions (its `null` is JavaScript: None here)
        reward_input = {
            "func_type": "reward",
            "agent_output": {
                "messages": [{"role": "user", "content": "Test"}],
                "reward_score": None
            }
        }
        out["tested"] = await AgenticRL.test_functions(
            instance_id=reward_iids[0], functype=FunctionType.REWARD, input_data=reward_input)
        # seed 001, YAML: init with name=, to_yaml, run, run with an override
        client = AgenticRL()
        client.init(config_path="job.yaml", name="agentic-rl-from-yaml")
        client.tuning.to_yaml(file_path="init.yaml")
        out["yaml_run"] = await client.run()
        out["override_run"] = await client.run(hyper_parameters={"learning_rate": "2e-4"})
        # seed 004: init(config_path, job_name=...)
        out["custom"] = await AgenticRL().init("job.yaml", job_name="custom_job").run()
        # seed 001, step by step: submit_job with entity ids and file ids
        training_ids, validation_ids = await client.upload_datasets(
            training_files=["./data/calc_train_min.jsonl"],
            validation_files=["./data/calc_validation_min.jsonl"])
        functions = [
            AgenticRLFunctionComponent(
                type=FunctionType.ROLLOUT,
                entity_id=rollout_eids[0],
                runtime=FunctionComponentRuntime(
                    cpu=2, memory_size=4096, disk_size=512,
                    concurrency=2, capacity=5)),
            AgenticRLFunctionComponent(
                type=FunctionType.REWARD,
                name="reward-1",
                weight=1.0,
                entity_id=reward_eids[0],
                runtime=FunctionComponentRuntime(
                    cpu=2, memory_size=4096, disk_size=512,
                    concurrency=10, capacity=8)),
        ]
        result = await client.submit_job(
            model="qwen3.5-9b",
            training_file_ids=training_ids,
            validation_file_ids=validation_ids,
            functions=functions,
            resources={"charge_type": "mtu_postpaid", "mtu_spec_code": "MTU4",
                       "mtu_capacity": 24},
            hyper_parameters={"algorithm": "gspo", "batch_size": 64, "eval_steps": 1,
                              "kl_loss_coef": 0.002, "learning_rate": 2e-6,
                              "lr_scheduler_type": "linear", "max_length": 8192,
                              "n_epochs": 1, "n_rollouts": 8, "ppo_mini_batch_size": 8,
                              "save_strategy": "epoch"})
        print(f"Job ID: {result.output.job_id}")
        out["submitted"] = result
        return out

    out = asyncio.run(flow())
    assert out["ids"][0][0].startswith("ro-") and out["ids"][4][0].startswith("rw-ins-")
    assert out["tested"]["status"] == "success"
    assert out["tested"]["output"]["reward"]["reward_score"] == 1.0
    assert "agentic-rl-from-yaml" in Path("init.yaml").read_text()
    for key in ("yaml_run", "override_run", "custom", "submitted"):
        assert out[key].status_code == 200 and out[key].output.job_id.startswith("ft-")
    jobs = {k: AgenticRL.get(out[k].output.job_id).output for k in
            ("yaml_run", "override_run", "custom", "submitted")}
    assert jobs["yaml_run"].job_name == "agentic-rl-from-yaml"
    assert jobs["custom"].job_name == "custom_job"
    hp = jobs["override_run"].config["training"]["hyper_parameters"]
    assert hp["learning_rate"] == 2e-4 and hp["batch_size"] == 64  # merged
    fns = jobs["submitted"].config["functions"]
    assert fns[1]["weight"] == 1.0 and fns[1]["type"] == "reward"
    # seed 001, job management
    assert AgenticRL.list().output["total"] == 4
    job_id = out["submitted"].output.job_id
    try:
        assert AgenticRL.cancel(job_id=job_id).output.status == "CANCELED"
    except ConflictError as exc:  # it was started and failed first (no such model here)
        assert "it is FAILED" in str(exc)
    assert isinstance(AgenticRL.logs(job_id=job_id, lines=100).output.logs, list)
    assert AgenticRL.delete(job_id=job_id).output["deleted"] is True
    with pytest.raises(Exception, match="no job"):
        AgenticRL.get(job_id=job_id)


class Done:
    def __init__(self, result):
        self.returncode, self.stdout, self.stderr = (result.exit_code, result.stdout,
                                                     result.stderr)


def cli(ws: Path, server, *args: str) -> Done:
    """``dashscope <args>`` as ``rltune <args>``, in this process (cwd = the workspace)."""
    from typer.testing import CliRunner

    from rltune.cli.main import app

    return Done(CliRunner().invoke(app, list(args), env=env_for(server)))


def cancel_or_already_failed(run) -> None:
    """Jobs on the docs' model names fail once started, so a queued job may end first."""
    r = run()
    assert r.returncode == 0 or "it is FAILED" in r.stderr, r.stderr


def test_doc_cli_calls(server, tmp_path, monkeypatch):
    import logging

    ws = make_workspace(tmp_path)
    monkeypatch.chdir(ws)
    for name in ("", "rltune"):  # the CLI sets these levels: restore them afterwards
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    # seed 004: register_functions with the singular --rollout-classpath
    r = cli(ws, server, "rl", "register_functions",
            "--rollout-classpath", "functions.rollout.rollout_only.DemoRolloutProcessor",
            "--group-reward-classpaths", "functions.reward.group_reward.DemoGroupRewardProcessor",
            "--workspace-dir", "./", "--output-format", "json")
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)
    r = cli(ws, server, "rl", "register_functions", "--reward-classpaths",
            "functions/reward/reward.py:DemoRewardProcessor", "-o", "json")
    reward_id = json.loads(r.stdout)["reward_entity_ids"][0]
    # seed 001 table: upload_data, submit with a JSON list of reward ids, run (both modes)
    r = cli(ws, server, "rl", "upload_data", "--training-files", "data/calc_train_min.jsonl",
            "--validation-files", "data/calc_validation_min.jsonl", "-o", "json")
    assert r.returncode == 0, r.stderr
    file_id = json.loads(r.stdout)["uploaded_training_ids"][0]
    r = cli(ws, server, "rl", "submit", "--model", "qwen3.5-9b",
            "--rollout-id", ids["rollout_entity_ids"][0], "--reward-ids", f'["{reward_id}"]',
            "--training-file-ids", file_id, "-o", "json")
    assert r.returncode == 0, r.stderr
    submitted = json.loads(r.stdout)
    r = cli(ws, server, "rl", "run", "--model", "qwen3.5-9b",
            "--rollout-classpaths", "functions.rollout.rollout.CalcXRolloutProcessor",
            "--reward-classpaths", "functions.reward.reward.DemoRewardProcessor",
            "--training-files", "data/calc_train_min.jsonl", "--verbose",
            "--rollout-name", "agent", "--reward-names", "acc", "--reward-weights", "0.5",
            "--reward-metric-weights", '[{"accuracy": 1.0}]',
            "--rollout-runtime", '{"concurrency": 4}', "--reward-runtimes", '[{"cpu": 1}]',
            "--hyper-parameters", '{"batch_size": 64}', "--no-follow", "-o", "json")
    assert r.returncode == 0, r.stderr
    direct = json.loads(r.stdout)["job_id"]
    r = cli(ws, server, "rl", "run", "-c", "job.yaml", "-o", "json")
    assert r.returncode == 0, r.stderr
    r = cli(ws, server, "rl", "get", direct, "-o", "json")
    cfg = json.loads(r.stdout)["config"]
    assert [(f["name"], f.get("weight")) for f in cfg["functions"]] == [("agent", None),
                                                                        ("acc", 0.5)]
    assert cfg["functions"][1]["reward_metric_weight"] == {"accuracy": 1.0}
    assert cfg["functions"][0]["runtime"]["concurrency"] == 4
    r = cli(ws, server, "rl", "get", submitted["job_id"], "-o", "json")
    assert [f["type"] for f in json.loads(r.stdout)["config"]["functions"]] == ["rollout",
                                                                                "reward"]
    r = cli(ws, server, "rl", "list", "--page", "1", "--size", "10", "-o", "json")
    assert json.loads(r.stdout)["total"] == 3
    cancel_or_already_failed(lambda: cli(ws, server, "rl", "cancel", direct))
    assert cli(ws, server, "rl", "logs", direct, "--offset", "1", "--lines", "100").returncode == 0
    assert cli(ws, server, "rl", "delete", direct).returncode == 0
    # a bad list and a count mismatch say which option is wrong
    r = cli(ws, server, "rl", "submit", "--model", "m", "--reward-ids", '["rw-1"',
            "--training-file-ids", file_id)
    assert r.returncode == 2 and "--reward-ids" in r.stderr
    r = cli(ws, server, "rl", "run", "--model", "m", "--training-files",
            "data/calc_train_min.jsonl", "--reward-classpaths", "a.B", "--reward-weights",
            "1,2", "--no-follow")
    assert r.returncode == 2 and "--reward-weights has 2 value(s) for 1 classpath" in r.stderr
