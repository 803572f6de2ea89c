import math

import pytest

from rltune.rollout.scoring import InvalidReward, combine_scores, component_score, own_score
from rltune.sdk import AgentOutput, Reward


def test_component_score_plain_and_metric_weighted():
    r = Reward(reward_score=0.3, reward_metrics={"acc": 1.0, "len": 0.5})
    assert component_score(r) == 0.3
    assert component_score(r, {"acc": 2.0, "len": -1.0}) == pytest.approx(1.5)


def test_missing_metric_is_a_clear_error():
    with pytest.raises(InvalidReward, match=r"\['len'\].*\['acc'\]"):
        component_score(Reward(reward_score=1, reward_metrics={"acc": 1.0}), {"len": 1.0})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_are_rejected(bad):
    with pytest.raises(InvalidReward, match="finite"):
        component_score(Reward(reward_score=bad))
    with pytest.raises(InvalidReward):
        own_score(AgentOutput(reward_score=bad))


def test_combine_is_weighted_sum_with_default_weight_one():
    assert combine_scores({"a": 1.0, "b": 0.5, "c": 2.0}, {"a": 0.5, "b": 2.0}) == 3.5


def test_own_score():
    assert own_score(AgentOutput(reward_score=0.25)) == 0.25
    assert own_score(AgentOutput()) is None and own_score(None) is None
