"""`rltune test-functions` and a training step score the same rollouts the same way.

One real training runtime (tiny model, engine, gateway, function worker processes) runs a
training step (``StepScheduler.run_step``); the harness (``run_dataset``, the dataset mode of
``rltune test-functions``) runs the same functions against the same gateway with a static key.
The rollouts are scripted by prompt and rollout index, so both sides see the same rollouts:
the rewards must match rollout for rollout, including ``reward_metric_weight``, a NaN reward
(that rollout is dropped on both sides) and a discarded group (dropped whole on both sides).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")

from rltune.config import load_job_config
from rltune.config.data import EpochSampler, load_dataset
from rltune.rollout.harness import ModelEndpoint, RewardRef, run_dataset

WS = Path(__file__).parent / "fixtures" / "ws"
KINDS = ("mixed", "right", "nan", "discard")
N = 4
RIGHT = 2.0 * (0.8 * 1.0 + 0.4 * 0.5) + 0.5 * 0.25 + 0.1  # graded (metric weights), style, flat
WRONG = 2.0 * (0.8 * 0.0 + 0.4 * 0.5) + 0.5 * 0.25 + 0.1


def _job(ws: Path, model_dir: Path) -> Path:
    rows = [{"messages": [{"role": "user", "content": f"{kind}: 2+2?"}],
             "rollout_extra": {"solution": "4", "kind": kind}} for kind in KINDS]
    (ws / "data").mkdir()
    (ws / "data" / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    runtime = {"concurrency": 16, "capacity": 1, "min_capacity": 1, "max_capacity": 1}

    def fn(kind: str, name: str, classpath: str, **more) -> dict:
        return {"type": kind, "name": name, "runtime": runtime,
                "fcmodel": {"zipdir": "./", "classpath": classpath}, **more}

    job = {
        "name": "same-scores", "model": {"name": str(model_dir)},
        "functions": [
            fn("rollout", "scripted", "functions/scripted.py:Scripted"),
            fn("reward", "graded", "functions/scripted.py:Graded", weight=2.0,
               reward_metric_weight={"acc": 0.8, "fmt": 0.4}),
            fn("reward", "style", "functions/scripted.py:Style", weight=0.5),
            fn("group_reward", "flat", "functions/scripted.py:Flat"),
        ],
        "datasets": [{"type": "training", "file_name": "data/train.jsonl"}],
        "training": {"type": "reinforcement", "hyper_parameters": {
            "algorithm": "grpo", "batch_size": len(KINDS), "n_rollouts": N,
            "max_length": 96, "max_prompt_length": 80, "save_strategy": "no",
            "max_rollout_retries": 0}},
    }
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws / "job.yaml"


def _harness_refs() -> list[RewardRef]:
    cp = "functions/scripted.py:"
    return [RewardRef(classpath=cp + "Graded", weight=2.0, name="graded",
                      metric_weights={"acc": 0.8, "fmt": 0.4}),
            RewardRef(classpath=cp + "Style", weight=0.5, name="style"),
            RewardRef(classpath=cp + "Flat", func_type="group_reward", name="flat")]


@contextlib.asynccontextmanager
async def _step_runner(tmp_path: Path, ws: Path, config_path: Path):
    """A started training runtime on the job at ``config_path`` and its (synchronous) step
    pipeline."""
    from rltune.trainer.runtime import TrainingRuntime
    from rltune.trainer.scheduler import StepScheduler
    from rltune.trainer.signals.table import build_signal
    from rltune.trainer.step import StepRunner

    config = load_job_config(config_path)
    prompts = load_dataset(ws / "data" / "train.jsonl")
    async with TrainingRuntime(config, job_dir=tmp_path / "job", base_dir=ws, job_id="same",
                               total_steps=1, log=lambda *a, **k: None) as rt:
        signal = build_signal(rt.hp, rt.knobs, updater=rt.updater, teacher=rt.teacher,
                              has_rewards=True)
        steps = StepRunner(rt, signal, job_id="same", train_rows=prompts,
                           sampler=EpochSampler(len(prompts), len(prompts)))
        pipeline = StepScheduler(steps, total_steps=1, max_staleness=0, partial_rollouts=False)
        try:
            yield rt, pipeline
        finally:
            await pipeline.close()


async def test_harness_and_training_step_score_alike(tmp_path, tiny_model_dir):
    ws = tmp_path / "ws"
    shutil.copytree(WS, ws)
    path = _job(ws, tiny_model_dir)
    prompts = load_dataset(ws / "data" / "train.jsonl")
    async with _step_runner(tmp_path, ws, path) as (rt, step):
        learned = await step.run_step(1)

        rt.gateway.register("sk-harness", "harness")  # the harness reaches the same policy
        report = await run_dataset(
            prompts, rollout="functions/scripted.py:Scripted", rewards=_harness_refs(), n=N,
            workspace=ws, model=ModelEndpoint(base_url=rt.gateway.base_url,
                                              model=rt.gateway.model_name, api_key="sk-harness"))

    by_prompt: dict[int, list] = {}
    for r in sorted(learned.results, key=lambda r: r.rollout_id):
        by_prompt.setdefault(r.row_index, []).append(r.score if r.usable else None)
    training = [by_prompt[i] for i in range(len(KINDS))]

    expected = [[RIGHT, WRONG, RIGHT, WRONG],  # mixed: reward_metric_weight decides
                [RIGHT] * N,  # right: no signal
                [RIGHT, None, RIGHT, RIGHT],  # nan: rollout 1's style reward is NaN
                [None] * N]  # discard: the whole group is dropped
    assert training == [[pytest.approx(v) if v else v for v in g] for g in expected]
    assert report.prompt_rewards == training
    assert report.final_reward.count == 11 and report.final_reward.max == pytest.approx(RIGHT)

    # the same drops, discards and signal on both sides
    metrics = learned.metrics
    assert report.dropped_rollouts == metrics["train/dropped_rollouts"] == 1 + N
    assert report.discarded_prompts == metrics["train/discarded_groups"] == 1
    assert (report.scored_prompts, report.learnable_prompts) == (3, 1)
    assert report.learnability == pytest.approx(1 - metrics["train/frac_reward_zero_std"])
    assert any("finite" in why for why in report.first_drop_reasons)
    assert any("discard" in why for why in report.first_drop_reasons)
    assert learned.updated  # the mixed group carries a signal


async def test_training_step_stops_on_a_metric_the_reward_never_returns(tmp_path,
                                                                         tiny_model_dir):
    """The first scoring of a job whose ``reward_metric_weight`` names a metric the reward
    never returns raises one ``ConfigError`` naming the field (not a dropped rollout each)."""
    from rltune.sdk.errors import ConfigError

    ws = tmp_path / "ws"
    shutil.copytree(WS, ws)
    path = _job(ws, tiny_model_dir)
    job = yaml.safe_load(path.read_text())
    job["functions"][1]["reward_metric_weight"] = {"accuracy": 1.0}
    path.write_text(yaml.safe_dump(job))
    async with _step_runner(tmp_path, ws, path) as (_rt, step):
        with pytest.raises(ConfigError) as err:
            await step.run_step(1)
    assert "reward_metric_weight names ['accuracy']" in str(err.value)
    assert err.value.where == "functions[graded].reward_metric_weight"
