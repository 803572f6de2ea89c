"""OPD teacher + reward: the reward's group advantage joins the teacher's per-token signal."""

from __future__ import annotations

import pytest

from rltune.config import load_job_config_text
from rltune.rollout.results import RolloutResult
from rltune.sdk.errors import ConfigError
from rltune.trainer.signals.opd_reward import reward_advantages

JOB = """
model: tiny
teacher_model: teacher
functions: [{type: reward, fcmodel: {classpath: "reward.py:R"}}]
training: {hyper_parameters: {opd_reward_weight: 0.5, n_rollouts: 2}}
"""


def result(rid, group, reward, ok=True, error=None):
    return RolloutResult(rid, f"s{group}", group, group, ok=ok, score=reward,
                         reward_error=error)


def test_group_advantages_scaled_by_the_weight_and_failed_rewards_left_out():
    rs = [result("a", 0, 1.0), result("b", 0, 0.0), result("c", 1, 2.0), result("d", 1, 2.0),
          result("e", 1, None, error="reward r: boom"), result("f", 2, 1.0, ok=False)]
    adv = reward_advantages(rs, weight=2.0, norm_by_std=False)
    assert adv == {"a": 1.0, "b": -1.0, "c": 0.0, "d": 0.0}
    assert reward_advantages(rs, weight=0.0, norm_by_std=True) == {}


def test_opd_reward_weight_only_where_it_takes_effect():
    job = load_job_config_text(JOB)
    assert job.hyper_parameters.opd_reward_weight == 0.5
    with pytest.raises(ConfigError, match="opd_reward_weight"):
        load_job_config_text(JOB.replace("teacher_model: teacher\n", ""))
    with pytest.raises(ConfigError, match="no teacher or no reward function"):
        load_job_config_text(JOB.replace('[{type: reward, fcmodel: {classpath: "reward.py:R"}}]',
                                         "[]"))


@pytest.mark.slow
async def test_an_opd_job_trains_on_the_reward_too(tmp_path, tiny_model_dir):
    """A real OPD job (built-in rollout, a length reward, weight 1000): in every group whose
    rewards differ, each rollout's mean token advantage has the sign of its reward advantage,
    which the teacher term alone (a few nats) could not give."""
    import json

    import yaml

    from rltune.config import load_job_config
    from rltune.models import build_tiny_model, save_model
    from rltune.trainer.loop import Trainer

    model, tok = build_tiny_model(seed=1)
    teacher = save_model(model, tok, tmp_path / "teacher")
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    rows = [{"messages": [{"role": "user", "content": f"Say something about {i}."}]}
            for i in range(4)]
    (ws / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (ws / "length.py").write_text(
        "def length(completions, **kwargs):\n"
        "    return [float(len(c[-1]['content'])) for c in completions]\n")
    (ws / "job.yaml").write_text(yaml.safe_dump({
        "model": {"name": str(tiny_model_dir)}, "teacher_model": str(teacher),
        "datasets": [{"type": "training", "file_name": "data/train.jsonl"}],
        "functions": [{"type": "reward", "name": "length",
                       "fcmodel": {"classpath": "length.py:length"},
                       "runtime": {"capacity": 1, "max_capacity": 1}}],
        "training": {"type": "pg_opd", "hyper_parameters": {
            "batch_size": 4, "n_rollouts": 2, "max_length": 48, "max_prompt_length": 36,
            "n_epochs": 1, "save_strategy": "no", "opd_reward_weight": 1000.0,
            "norm_adv_by_std": False}}}))
    job_dir = tmp_path / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    traj = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
    groups: dict[int, list] = {}
    for t in traj:
        groups.setdefault(t["sample_index"], []).append(t)
    differing = [g for g in groups.values() if len({t["reward"] for t in g}) > 1]
    assert differing, [t["reward"] for t in traj]
    for g in differing:
        mean = sum(t["reward"] for t in g) / len(g)
        for t in g:
            expected = 1000.0 * (t["reward"] - mean)
            assert t["advantage"] == pytest.approx(expected, abs=50.0), (t, expected)
