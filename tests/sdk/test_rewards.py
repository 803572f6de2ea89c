"""Semantics of the reward decorators (the cloud SDK's, with concurrent async sub-rewards)."""

import asyncio
import threading
import time

import pytest

from rltune.sdk import (
    AbstractRewardProcessor,
    Reward,
    RewardInput,
    RewardOutput,
    TaskStatus,
    aggregate_func,
    reward_func,
    sub_reward_func,
)

INPUT = RewardInput(
    ground_truth="5", agent_output={"messages": [{"role": "assistant", "content": "5"}]}
)


def score(value, **metrics):
    return RewardOutput(reward=Reward(reward_score=value, reward_metrics=metrics or None))


@reward_func("weighted")
class Weighted(AbstractRewardProcessor):
    @sub_reward_func("a", 0.7)
    def a(self, inp):
        return score(1.0)

    @sub_reward_func("b", 0.3)
    async def b(self, inp):
        return score(0.5)

    @sub_reward_func(name="c", sub_weight=2.0)
    def c(self, inp):
        raise RuntimeError("judge exploded")


async def test_weighted_sum_is_not_normalised_and_failed_sub_scores_zero():
    proc = Weighted()
    out = await proc.process(INPUT)
    # 0.7*1.0 + 0.3*0.5 + 2.0*0 = 0.85 (the cloud SDK's documented example)
    assert out.reward.reward_score == pytest.approx(0.85)
    assert out.status is TaskStatus.SUCCESS
    assert out.reward.reward_metrics is None
    assert proc.get_weights() == {"a": 0.7, "b": 0.3, "c": 2.0}


async def test_raising_sub_reward_is_failed_with_error():
    from rltune.sdk.rewards import run_sub_rewards

    subs = await run_sub_rewards(Weighted(), INPUT)
    assert list(subs) == ["a", "b", "c"]  # alphabetical by attribute name
    assert subs["c"].status is TaskStatus.FAILED
    assert subs["c"].reward.reward_score == 0.0
    assert subs["c"].reward.reward_metrics == {}
    assert "judge exploded" in subs["c"].error
    assert subs["a"].status is TaskStatus.SUCCESS


@reward_func("agg")
class WithAggregate(AbstractRewardProcessor):
    @sub_reward_func("format", 0.3)
    def fmt(self, inp):
        return score(1.0, valid=1.0)

    @sub_reward_func("exact", 0.7)
    def exact(self, inp):
        return score(0.0, dist=3.0)

    @aggregate_func
    async def combine(self, sub_rewards):
        assert self.get_scores(sub_rewards) == {"exact": 0.0, "format": 1.0}
        return RewardOutput(
            reward=Reward(reward_score=42.0, reward_metrics=self.get_reward_metrics(sub_rewards))
        )


async def test_aggregate_function_wins():
    out = await WithAggregate().process(INPUT)
    assert out.reward.reward_score == 42.0
    assert out.reward.reward_metrics == {"exact.dist": 3.0, "format.valid": 1.0}


def test_get_total_rejects_unknown_name():
    proc = WithAggregate()
    assert proc.get_total({"format": score(1.0), "exact": score(1.0)}) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="nope"):
        proc.get_total({"nope": score(1.0)})


@reward_func("conc")
class SlowAsync(AbstractRewardProcessor):
    @sub_reward_func
    async def one(self, inp):
        await asyncio.sleep(0.3)
        return score(1.0)

    @sub_reward_func
    async def two(self, inp):
        await asyncio.sleep(0.3)
        return score(1.0)

    @sub_reward_func
    async def three(self, inp):
        await asyncio.sleep(0.3)
        return score(1.0)


async def test_async_sub_rewards_run_concurrently():
    start = time.perf_counter()
    out = await SlowAsync().process(INPUT)
    elapsed = time.perf_counter() - start
    assert out.reward.reward_score == 3.0
    # Sequential would take >= 0.9 s; concurrent takes ~0.3 s.
    assert elapsed < 0.8, elapsed


@reward_func("threads")
class SyncSubs(AbstractRewardProcessor):
    def __init__(self):
        super().__init__()
        self.barrier = threading.Barrier(2, timeout=5)

    @sub_reward_func
    def left(self, inp):
        self.barrier.wait()  # deadlocks unless both run at the same time
        return 1.0

    @sub_reward_func
    def right(self, inp):
        self.barrier.wait()
        return Reward(reward_score=2.0)


async def test_sync_sub_rewards_run_in_threads_and_plain_values_are_accepted():
    out = await SyncSubs().process(INPUT)
    assert out.reward.reward_score == 3.0


def test_decorated_class_needs_no_process_and_keeps_meta():
    assert WithAggregate.reward_meta.processor_id == "agg"
    with pytest.raises(TypeError):

        class NoProcess(AbstractRewardProcessor):
            pass

        NoProcess()


def test_duplicate_sub_reward_names_are_rejected():
    with pytest.raises(TypeError, match="two sub-rewards are named 'x'"):

        @reward_func("dup")
        class Dup(AbstractRewardProcessor):
            @sub_reward_func("x")
            def a(self, inp):
                return 1.0

            @sub_reward_func("x")
            def b(self, inp):
                return 1.0

        Dup()


async def test_bad_return_type_is_a_failed_sub_reward():
    @reward_func("bad")
    class Bad(AbstractRewardProcessor):
        @sub_reward_func
        def a(self, inp):
            return "high"

    from rltune.sdk.rewards import run_sub_rewards

    subs = await run_sub_rewards(Bad(), INPUT)
    assert subs["a"].status is TaskStatus.FAILED
    assert "return a RewardOutput" in subs["a"].error
