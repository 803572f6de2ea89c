"""The step loop end to end on an untrained tiny model: real pools, gateway and engine.

These check plumbing (metrics, trajectories, checkpoints, resume, dropped rollouts); the
learning test with a warm-started model is in test_learning.py.
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from rltune.config import load_job_config
from rltune.config.data import EpochSampler
from rltune.jobdir import read_trainer_state
from rltune.templates import create_workspace
from rltune.trainer.loop import Trainer
from rltune.trainer.sink import FileSink, read_metrics
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

FIXTURES = Path(__file__).parent / "fixtures"

#: What the one step pipeline (the group stream) reports every step, in every max_staleness
#: mode: a synchronous step (0) runs through the same collector as a streaming one.
PIPELINE_KEYS = {
    "fully_async/idle/engine_s", "fully_async/idle/engine_share",
    "fully_async/idle/trainer_s", "fully_async/idle/trainer_share",
    "fully_async/stream/started_groups", "fully_async/stream/running_groups",
    "fully_async/stream/ready_groups", "fully_async/stream/carried_over_groups",
    "fully_async/stream/replaced_groups", "fully_async/stream/max_group_lag",
    "fully_async/dropped_stale_rollouts", "fully_async/staleness/max",
    "train/sampling_rounds",
}


def assert_step_times_are_the_wall_clock(rows: list[dict]) -> None:
    """``timing/s/step`` (plus the step's own validation) is the wall clock between two steps'
    metrics lines, in every mode: nothing the loop does between steps (outputs, checkpoints,
    the doctor) is left out of it."""
    for prev, row in itertools.pairwise(rows):
        m = row["metrics"]
        wall = row["time"] - prev["time"]
        told = m["timing/s/step"] + m.get("timing/s/validation", 0.0)
        assert told == pytest.approx(wall, rel=0.05, abs=0.1), (row["step"], told, wall)
        assert 0.0 <= m["timing/s/outside_step"] < m["timing/s/step"]


def make_workspace(tmp_path: Path, model_dir: Path, **hp) -> Path:
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=12, val_rows=4)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, **hp})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def test_steps_write_metrics_trajectories_and_checkpoints(tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=1)
    job_dir = tmp_path / "job"
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws)
    assert trainer.total_steps == 6
    summary = await trainer.run()
    rows = read_metrics(job_dir)
    assert [r["step"] for r in rows] == list(range(7))  # step 0 = validation before training
    last = rows[-1]["metrics"]
    for name in (
        "critic/rewards/mean",
        "trajectory/response_length/mean",
        "timing/s/step",
        "trace/num_llm_calls/mean",
        "trace/success_rate/agent",
        "perf/throughput",
        "trace/reward/exact/mean",
        "validation/data/reward/mean@1",
    ):
        assert name in last, name
    assert last["trace/success_rate/agent"] == 1.0
    assert_step_times_are_the_wall_clock(rows)  # checkpoints and validations between steps
    for step in range(1, 7):  # max_staleness 0: one batch a step, through the group stream
        m = rows[step]["metrics"]
        assert set(m) >= PIPELINE_KEYS, PIPELINE_KEYS - set(m)
        assert m["fully_async/stream/started_groups"] == 2 * step  # exactly one batch
        assert m["fully_async/stream/running_groups"] == 0  # drained before the update
        assert m["fully_async/staleness/max"] == 0 and m["train/sampling_rounds"] == 1
        # measured with clocks: the engine waits out the update and the sync, the trainer
        # the rollouts; nothing overlaps, so at every moment one of the two is idle
        assert 0 < m["fully_async/idle/engine_s"] <= m["timing/s/step"]
        assert 0 < m["fully_async/idle/trainer_s"] <= m["timing/s/step"]
        shares = m["fully_async/idle/engine_share"] + m["fully_async/idle/trainer_share"]
        assert shares >= 1 - 1e-6
    traj = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
    assert len(traj) == 4
    first = traj[0]
    assert first["messages"][-1]["role"] == "assistant"
    assert first["status"] == "success" and first["rewards"] == {"exact": 0.0}
    tokens = first["tokens"][0]
    assert len(tokens["input_ids"]) == len(tokens["loss_mask"]) == len(tokens["logprobs"])
    assert sum(tokens["loss_mask"]) == first["response_tokens"] > 0
    ckpts = [Path(p).name for p in summary["checkpoints"]]
    assert ckpts == ["checkpoint-4", "checkpoint-5", "checkpoint-6"]  # save_total_limit 3
    assert "step 6/6" in (job_dir / "train.log").read_text()
    progress = json.loads((job_dir / "progress.json").read_text())
    assert (progress["state"], progress["step"], progress["total_steps"]) == ("finished", 6, 6)
    assert summary["stopped_at_validation_reward"] is None  # no target: every step ran


async def test_the_configured_tool_call_parser_serves_the_job(tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="no", n_epochs=1)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["tool_call_parser"] = "llama3_json"  # the tiny model is qwen2: hermes otherwise
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    assert "tool-call parser llama3_json" in (job_dir / "train.log").read_text()


async def test_an_unknown_model_family_stops_the_job_before_the_weights_load(
    tmp_path, tiny_model_dir
):
    from rltune.sdk.errors import ConfigError

    model = tmp_path / "gemma"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    config.update(model_type="gemma3", architectures=["Gemma3ForCausalLM"])
    (model / "config.json").write_text(json.dumps(config))
    ws = make_workspace(tmp_path, model, save_strategy="no")
    with pytest.raises(ConfigError, match="gemma3"):
        await Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws).run()


async def test_stop_at_validation_reward_ends_the_job_at_the_first_validation_reaching_it(
        tmp_path, tiny_model_dir):
    # The untrained model never answers right: validation reward 0.0 reaches a target of 0
    # at the first validation (step 2 of 6) and that step is checkpointed.
    ws = make_workspace(tmp_path, tiny_model_dir, stop_at_validation_reward=0.0,
                        save_steps=5, n_epochs=1)
    job_dir = tmp_path / "job"
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    assert summary["steps"] == 2 and summary["stopped_at_validation_reward"] == 2
    assert summary["validation"] == [(2, 0.0)]
    assert [Path(p).name for p in summary["checkpoints"]] == ["checkpoint-2"]
    assert [r["step"] for r in read_metrics(job_dir)] == [0, 1, 2]
    assert "reached stop_at_validation_reward 0 at step 2" in (job_dir / "train.log").read_text()
    progress = json.loads((job_dir / "progress.json").read_text())
    assert (progress["state"], progress["step"], progress["total_steps"]) == ("finished", 2, 6)


async def test_validation_samples_each_prompt_val_n_rollouts_times(tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="no", val_n_rollouts=3)
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    rows = read_metrics(job_dir)
    assert rows[0]["metrics"]["validation/data/samples"] == 4 * 3  # 4 prompts x 3 samples


async def test_validation_samples_at_val_temperature_and_training_at_temperature(
        tmp_path, tiny_model_dir):
    # The rollout reports the temperature its sampling_params carry and the reward scores it,
    # so each phase's reward is the temperature it sampled at, through the real workers.
    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="no", max_steps=2,
                        temperature=1.5, val_temperature=0.5)
    shutil.copytree(FIXTURES / "tempws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["functions"][0]["fcmodel"]["classpath"] = "functions/sampling_echo.py:TemperatureRollout"
    job["functions"][1]["fcmodel"]["classpath"] = "functions/sampling_echo.py:TemperatureReward"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    rows = read_metrics(job_dir)
    assert rows[0]["metrics"]["validation/data/reward/mean@1"] == pytest.approx(0.5)
    assert rows[2]["metrics"]["validation/data/reward/mean@1"] == pytest.approx(0.5)
    assert rows[1]["metrics"]["critic/rewards/mean"] == pytest.approx(1.5)


async def test_nan_reward_drops_the_rollout_and_the_job_goes_on(tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, save_strategy="no")
    shutil.copytree(FIXTURES / "nanws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:SometimesNaN"
    job["training"]["hyper_parameters"]["batch_size"] = 6
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    assert summary["steps"] == 2
    step1 = read_metrics(job_dir)[1]["metrics"]
    solutions = [json.loads(x) for x in (ws / "data" / "train.jsonl").open()]
    assert any(int(r["rollout_extra"]["solution"]) % 2 == 0 for r in solutions)
    assert step1["train/dropped_rollouts"] > 0
    assert step1["trace/success_rate/reward"] < 1.0
    log = (job_dir / "train.log").read_text()
    assert "dropped" in log and "finite" in log
    traj = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
    failed = [t for t in traj if t["status"] == "failed"]
    assert failed and all("finite" in t["error"] for t in failed)


async def test_resume_continues_from_checkpoint_and_replays_steps_once(tmp_path, tiny_model_dir):
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=1)
    cfg = load_job_config(ws / "job.yaml")
    job_dir = tmp_path / "job"
    first = await Trainer(cfg, job_dir=job_dir, base_dir=ws).run()
    ckpt = Path(first["checkpoints"][0])
    assert ckpt.name == "checkpoint-4"

    def prompts(step):
        path = job_dir / "trajectories" / f"step_{step:06d}.jsonl"
        return sorted(json.loads(x)["row_index"] for x in path.open())

    before = prompts(5)
    # Resume in the same job directory, as the job server does: steps 5 and 6 ran after the
    # checkpoint, so they are replayed and their outputs replaced, never appended.
    resumed = await Trainer(cfg, job_dir=job_dir, base_dir=ws).run(resume_from=ckpt)
    assert resumed["steps"] == 2
    assert [r["step"] for r in read_metrics(job_dir)] == list(range(7))
    assert len(prompts(5)) == len(before) == 4
    assert prompts(5) == before  # same data order after resume: the same prompts
    assert not list((job_dir / "trajectories").glob("*.tmp"))


def test_bad_dataset_line_is_a_clear_error(tmp_path, tiny_model_dir):
    from rltune.sdk.errors import DatasetError

    ws = make_workspace(tmp_path, tiny_model_dir)
    with (ws / "data" / "train.jsonl").open("a") as fh:
        fh.write('{"messages": "not a list"}\n')
    with pytest.raises(DatasetError, match=r"train\.jsonl:13"):
        Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws)


@pytest.mark.parametrize("partial", [False, True])
async def test_max_staleness_1_overlaps_steps_and_accounts_for_staleness(
        tmp_path, tiny_model_dir, partial, monkeypatch):
    """Step k+1's rollouts are sampled before step k's update reaches the engine: from step 2
    on they are one version old (partial rollouts: some tokens already on the new weights);
    checkpoints keep the data order of the groups not yet trained, not of the rollouts sampled
    ahead, so a resumed job draws them again (checked once; the partial run is 3 steps)."""
    n = 3 if partial else 6
    ws = make_workspace(tmp_path, tiny_model_dir, eval_steps=3, max_staleness=1,
                        # 8 per group: LengthParity leaves a group without signal with p = 2^-7
                        # (4 per group, p = 1/8, failed a CI run: a step without an update)
                        partial_rollouts=partial, n_rollouts=8,
                        save_strategy="no" if partial else "steps",
                        **({"max_steps": n} if partial else {"n_epochs": 1}))
    shutil.copytree(FIXTURES / "nanws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    cfg = load_job_config(ws / "job.yaml")
    job_dir = tmp_path / "job"
    if partial:  # slow outputs between steps: the step times must still add up to the clock
        write = FileSink.trajectories
        monkeypatch.setattr(FileSink, "trajectories",
                            lambda self, *a: (time.sleep(0.3), write(self, *a))[1])
    first = await Trainer(cfg, job_dir=job_dir, base_dir=ws).run()
    steps = {r["step"]: r["metrics"] for r in read_metrics(job_dir)}
    assert sorted(steps) == list(range(n + 1))
    if partial:
        assert all(steps[s]["timing/s/outside_step"] >= 0.3 for s in range(2, n + 1))
    assert_step_times_are_the_wall_clock(read_metrics(job_dir))  # streaming: the same clock
    assert all(steps[s]["train/trainable_rows"] > 0 for s in range(1, n + 1))  # all update
    assert steps[1]["fully_async/staleness/max"] == 0  # nothing was sampled ahead of step 1
    for s in range(2, n + 1):
        m = steps[s]
        # partial rollouts: a turn that starts after the update is sampled by the new weights
        assert m["fully_async/staleness/max"] in ((0.0, 1.0) if partial else (1.0,)), s
        assert m["fully_async/dropped_stale_rollouts"] == 0
        shares = [v for k, v in m.items() if k.startswith("fully_async/token_share/")]
        assert sum(shares) == pytest.approx(1.0)
        if not partial:  # the weights only change once the rollouts sampled ahead are in
            assert m["fully_async/staleness/share_1"] == 1.0
            assert m["fully_async/partial_rollout_share"] == 0.0
        assert 0.5 < m["fully_async/behaviour_weight/mean"] < 2.0
        assert set(m) >= PIPELINE_KEYS, PIPELINE_KEYS - set(m)
        for who in ("engine", "trainer"):
            assert 0.0 <= m[f"fully_async/idle/{who}_share"] <= 1.0
    assert "validation/data/reward/mean@1" in steps[3]

    if partial:
        return

    def prompts(step):
        path = job_dir / "trajectories" / f"step_{step:06d}.jsonl"
        return sorted(json.loads(x)["row_index"] for x in path.open())

    ckpt = Path(first["checkpoints"][0])
    assert ckpt.name == "checkpoint-4"
    # streaming: the checkpoint holds the data order before the oldest prompt batch with a
    # group not yet trained, so the resumed job draws its prompts from there on (none skipped)
    state = read_trainer_state(ckpt)["data_order"]
    order = EpochSampler(12, 2, seed=state["seed"])
    order.load_state_dict(state)
    assert order.epoch * 12 + order.position <= 4 * 2  # not past what step 4 trained
    owed = {i for _ in range(3) for i in order.next_batch()}
    resumed = await Trainer(cfg, job_dir=job_dir, base_dir=ws).run(resume_from=ckpt)
    assert resumed["steps"] == 2
    assert set(prompts(5)) <= owed


class ProtocolSink:
    """A sink with exactly the methods of the ``Sink`` protocol, recording what it gets."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.alerts: list[tuple[int, str, str]] = []

    def metrics(self, step, values):
        self.steps.append(step)

    def trajectories(self, step, records):
        pass

    def log(self, message, level="INFO"):
        pass

    def progress(self, state):
        pass

    def alert(self, step, code, title, text):
        self.alerts.append((step, code, text))

    def close(self):
        pass


async def test_a_sink_written_to_the_protocol_receives_the_doctors_alerts(tmp_path,
                                                                         tiny_model_dir):
    """The untrained tiny model never stops within 20 tokens: every answer is cut, and the
    doctor's P9 (window 1) fires at step 1; the alert reaches the job's own sink."""
    from rltune.trainer.sink import Sink

    ws = make_workspace(tmp_path, tiny_model_dir, max_steps=1, save_strategy="no")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["advisor"] = {"thresholds": {"P9": {"window": 1}}}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    sink = ProtocolSink()
    assert {m for m in dir(Sink) if not m.startswith("_")} == {
        m for m in dir(ProtocolSink) if not m.startswith("_")}
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=tmp_path / "job", base_dir=ws,
                  sink=sink).run()
    assert sink.steps == [0, 1]
    assert [(step, code) for step, code, _ in sink.alerts] == [(1, "P9")]
    assert "high truncation rate" in sink.alerts[0][2]
