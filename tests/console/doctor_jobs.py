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

#: case -> what the job is made of, and the codes of which one must be raised. Measured on an
#: AMD EPYC (the default CPU kernels, and again under ATEN_CPU_CAPABILITY=avx2
#: ONEDNN_MAX_CPU_ISA=AVX2): see each comment.
CASES: dict[str, dict[str, Any]] = {
    # a learning rate 3.5x the learning test's, no KL penalty to speak of: the reward is 0.56
    # and 0.62 at steps 2-3, then the answers run to max_length (clip ratio 0.6-0.8, reward
    # 0); at the first steps with a reward to learn from again (6, 7) the KL to the reference
    # is 0.97, then 2.6, entropy 0.18 -> 3.2: P3 at step 7 (P9 at 6)
    "lr": {"hp": {"max_steps": 8, "learning_rate": 7e-4, "kl_loss_coef": 0.001},
           "expect": {"P3"}},
    # max_length 4 tokens past the prompt: every answer is cut (clip ratio 1.0), P9 at step 3
    "truncation": {"hp": {"max_steps": 3, "max_length": 204}, "expect": {"P9"}},
    # a reward that pays for length: length 19.7 -> 42.4 tokens while the reward rises by
    # 0.47 (correlation 0.99): hack/length at step 4 (warmup 0: this job learns nothing else)
    "length": {"hp": {"max_steps": 4, "learning_rate": 1e-3}, "reward": LENGTH_REWARD,
               "advisor": {"thresholds": {"hack/length": {"window": 4, "warmup": 0}}},
               "expect": {"hack/length"}},
    # one question repeated: the training reward 0.5 -> 0.77 while the held-out validation
    # falls from 0.56 (step 2) to 0.38 (step 6): P6 (and hack/divergence) at step 6
    "overfit": {"hp": {"max_steps": 6, "learning_rate": 5e-4, "eval_steps": 2},
                "distinct": 1, "val_rows": 16, "expect": {"P6"}},
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


def submit(server: Any, work: Path, model_dir: Path, case: str) -> str:
    """Submit the case's job to a running job server the user's way (functions from a zip of
    the workspace, datasets uploaded); returns the job id."""
    from console_harness import upload

    from rltune.functions.archive import zip_workspace

    ws = workspace(work, model_dir, case)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    archive = zip_workspace(ws, work / f"{case}.zip").path.read_bytes()
    for fn in job["functions"]:
        fc = fn.pop("fcmodel")
        fn["entity_id"] = server.call(
            "POST", "/v1/functions",
            params={"classpath": fc["classpath"], "type": fn["type"], "name": fn["name"]},
            content=archive, headers={"Content-Type": "application/octet-stream"},
        )["entity_id"]
    job["datasets"] = [{"type": d["type"], "file_id": upload(server, ws / d["file_name"])}
                       for d in job["datasets"]]
    return server.call("POST", "/v1/jobs", json={"config": job})["job_id"]
