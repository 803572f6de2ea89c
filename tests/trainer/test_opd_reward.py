"""OPD teacher + reward: the reward's group advantage joins the teacher's per-token signal."""

from __future__ import annotations

import pytest

from rltune.config import load_job_config_text
from rltune.sdk.errors import ConfigError
from rltune.trainer.opd_reward import reward_advantages
from rltune.trainer.rollouts import RolloutResult

JOB = """
model: tiny
teacher_model: teacher
functions: [{type: reward, fcmodel: {classpath: "reward.py:R"}}]
training: {hyper_parameters: {opd_reward_weight: 0.5, n_rollouts: 2}}
"""


def result(rid, group, reward, ok=True, error=None):
    return RolloutResult(rid, f"s{group}", group, group, ok=ok, reward=reward,
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
