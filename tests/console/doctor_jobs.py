"""Jobs of the warm-started nano calculator agent made to fail one way each, for the training
doctor's end-to-end tests (tests/console/test_doctor_failures.py) and for running one by hand::

    RLTUNE_TEST_NANO=$RLTUNE_HOME/models/nano python tests/console/doctor_jobs.py length

Every rollout samples with its own seed (``SeededCalcRollout``: the calc template's rollout
with ``seed`` = a hash of the rollout's id within the job), so a job samples the same tokens on
every run instead of whatever the engine's shared random stream gives the rollouts racing
through it. What each job then does was measured (``CASES``, the docstrings).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import yaml

from rltune.models.recipes import recipe_for
from rltune.models.tasks import make_dataset_rows, write_jsonl
from rltune.templates import TEMPLATES_DIR

SEEDED_ROLLOUT = '''
"""The calc template's rollout, sampling with a seed per rollout: the job reproduces."""
import importlib.util
import zlib
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "calc_rollout_unseeded", Path(__file__).with_name("rollout.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)


class SeededCalcRollout(_base.CalcRollout):
    async def process(self, input_data):
        meta = input_data.request_metadata
        where = meta.rollout_id[len(meta.job_id):] if meta else ""  # "-s3-p1.r2"
        params = dict(input_data.sampling_params or {})
        params["seed"] = zlib.crc32(where.encode())
        input_data.sampling_params = params
        return await super().process(input_data)
'''

LENGTH_REWARD = '''
from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput


class LengthReward(AbstractRewardProcessor):
    """Pays for length: the longer the conversation's assistant text, the higher the reward."""

    def process(self, input_data: RewardInput) -> RewardOutput:
        text = "".join(str(m.get("content") or "") for m in input_data.agent_output.messages
                       if m.get("role") == "assistant")
        return RewardOutput(reward=Reward(reward_score=min(1.0, len(text) / 300)))
'''

BASE_HP: dict[str, Any] = {
    "algorithm": "gspo", "batch_size": 4, "n_rollouts": 4, "learning_rate": 2e-4,
    "ppo_mini_batch_size": 16, "kl_loss_coef": 0.0, "max_length": 256,
    "max_prompt_length": 200, "eval_steps": 2, "val_n_rollouts": 1, "save_strategy": "no",
    "seed": 3, "n_epochs": 1,
}

#: case -> what the job is made of, and the codes of which one must be raised.
CASES: dict[str, dict[str, Any]] = {
    # a learning rate 15x too high: the answers run to max_length and the KL to the reference
    # explodes (P3) or entropy collapses (P4)
    "lr": {"hp": {"max_steps": 6, "learning_rate": 3e-3, "kl_loss_coef": 0.001},
           "expect": {"P3", "P4", "P9"}},
    # max_length 8 tokens past the prompt: most answers are cut (P9)
    "truncation": {"hp": {"max_steps": 3, "max_length": 208}, "expect": {"P9"}},
    # a reward that pays for length: the answers grow with the reward (hack/length)
    "length": {"hp": {"max_steps": 4, "learning_rate": 1e-3}, "reward": LENGTH_REWARD,
               "advisor": {"thresholds": {"hack/length": {"window": 4, "warmup": 0}}},
               "expect": {"hack/length"}},
    # two questions repeated: training reward up, held-out validation down (P6)
    "overfit": {"hp": {"max_steps": 8, "learning_rate": 5e-4, "eval_steps": 2},
                "distinct": 2, "val_rows": 16, "expect": {"P6"}},
}


def workspace(work: Path, model_dir: Path, case: str, *, train_rows: int = 64) -> Path:
    """The calc template in ``work/<case>`` made into the case's job (``job.yaml`` with local
    data files and classpaths); returns the workspace folder."""
    spec = CASES[case]
    ws = work / case
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    (ws / "functions" / "seeded_rollout.py").write_text(SEEDED_ROLLOUT)
    task = recipe_for("nano").config.task
    rows = make_dataset_rows(spec.get("distinct") or train_rows, "train", seed=1, config=task)
    write_jsonl((rows * train_rows)[:train_rows], ws / "data" / "train.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["name"] = f"doctor-{case}"
    job["model"]["name"] = str(model_dir)
    if spec.get("val_rows"):
        write_jsonl(make_dataset_rows(spec["val_rows"], "heldout", seed=0, config=task),
                    ws / "data" / "val.jsonl")
    else:
        job["datasets"] = [d for d in job["datasets"] if d["type"] == "training"]
    rollout, reward = job["functions"]
    rollout["fcmodel"]["classpath"] = "functions/seeded_rollout.py:SeededCalcRollout"
    if spec.get("reward"):
        (ws / "functions" / "length_reward.py").write_text(spec["reward"])
        reward["fcmodel"]["classpath"] = "functions/length_reward.py:LengthReward"
    for fn in job["functions"]:  # a function of an earlier job in this process is not reused
        fn["name"] = f"{fn['name']}-{case}"
    job["training"]["hyper_parameters"] = {**BASE_HP, **spec["hp"]}
    if spec.get("advisor"):
        job["advisor"] = copy.deepcopy(spec["advisor"])
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def run_local(work: Path, model_dir: Path, case: str) -> list[str]:
    """Train the case's job in this process; returns the codes in its ``alerts.jsonl``."""
    from rltune.config import load_job_config
    from rltune.doctor import read_alerts
    from rltune.trainer.loop import Trainer

    ws = workspace(work, model_dir, case)
    job_dir = work / f"{case}-job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    alerts = read_alerts(job_dir)
    print(case, [a.line() for a in alerts])
    return [a.code for a in alerts]


if __name__ == "__main__":
    import asyncio
    import os
    import sys
    import tempfile

    model = Path(os.environ["RLTUNE_TEST_NANO"])
    for name in sys.argv[1:] or list(CASES):
        asyncio.run(run_local(Path(tempfile.mkdtemp(prefix=f"doctor-{name}-")), model, name))
