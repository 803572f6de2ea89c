"""What a function sees in a local ``rltune train``: the user's own environment and files, as
their own script would (a reward reading ``OPENAI_API_KEY`` or ``HF_HOME``, writing a debug
file next to the user's data); a trainer without that flag (the job server's) keeps the
minimal environment, and its log says what to pass and how."""

from __future__ import annotations

import json

import yaml
from test_doctor_alerts import tiny_workspace
from typer.testing import CliRunner

from rltune.cli.main import app
from rltune.config import load_job_config
from rltune.functions.sandbox import active_isolation
from rltune.sdk.errors import TrainingFailedError
from rltune.trainer.loop import Trainer

REWARD = '''
import json, os
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

class EnvCheck(AbstractRewardProcessor):
    async def process(self, input_data):
        seen = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "HF_HOME", "HOME")}
        with open(DEBUG, "w") as fh:  # a file of the user's, outside the workspace
            json.dump(seen, fh)
        return RewardOutput(reward=Reward(reward_score=1.0))
'''


def workspace(tmp_path, tiny_model_dir):
    ws = tiny_workspace(tmp_path, tiny_model_dir, train_rows=2, val_rows=1, max_steps=1,
                        save_strategy="no")
    debug = tmp_path / "mine" / "debug.json"
    debug.parent.mkdir()
    (ws / "functions" / "envcheck.py").write_text(f"DEBUG = {str(debug)!r}\n" + REWARD)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    reward = next(f for f in job["functions"] if f["type"] == "reward")
    reward["fcmodel"]["classpath"] = "functions/envcheck.py:EnvCheck"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws, debug


def test_local_train_functions_see_the_users_environment_and_files(
        tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.delenv("RLTUNE_FUNCTION_ISOLATION", raising=False)  # the default: auto
    monkeypatch.setenv("OPENAI_API_KEY", "sk-mine")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    ws, debug = workspace(tmp_path, tiny_model_dir)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["train", "-c", str(ws / "job.yaml"), "-O", str(out)])
    assert res.exit_code == 0, res.output
    seen = json.loads(debug.read_text())
    assert seen["OPENAI_API_KEY"] == "sk-mine" and seen["HF_HOME"] == str(tmp_path / "hf")
    assert "functions run as you (a local rltune train)" in (out / "train.log").read_text()


async def test_a_trainer_of_the_job_server_keeps_functions_to_the_minimal_env(
        tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-mine")
    ws, debug = workspace(tmp_path, tiny_model_dir)
    out = tmp_path / "out"
    try:
        await Trainer(load_job_config(ws / "job.yaml"), job_dir=out, base_dir=ws).run()
    except TrainingFailedError as exc:  # the sandbox: the user's folder is not there at all
        assert active_isolation() == "bwrap" and "FileNotFoundError" in str(exc), exc
    else:  # no sandbox here: the file is reachable, the key is still not passed
        assert json.loads(debug.read_text())["OPENAI_API_KEY"] is None
    log = (out / "train.log").read_text()
    assert "pass a variable such as OPENAI_API_KEY in the function's runtime.env" in log
