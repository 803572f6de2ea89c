"""Plain TRL / verl reward functions wrapped as processors, in process and in a real worker."""

from __future__ import annotations

import asyncio

import pytest

from rltune.sdk.data import GroupRewardInput, RewardInput, TaskStatus
from rltune.sdk.errors import UserCodeError
from rltune.sdk.plain import processor_for_function, trl_reward, verl_reward

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "The answer is 4"}]


def reward_input(content="The answer is 4", extra=None, gt="4"):
    return RewardInput.model_validate({"ground_truth": gt, "agent_output": {
        "messages": [*MSGS[:2], {"role": "assistant", "content": content}],
        "rollout_extra": extra}})


def test_trl_function_gets_columns_and_conversational_completions():
    seen = {}

    def accuracy(completions, prompts, ground_truth, difficulty, **kwargs):
        seen.update(prompts=prompts, difficulty=difficulty)
        pairs = zip(completions, ground_truth, strict=True)
        return [float(c[-1]["content"].endswith(g)) for c, g in pairs]

    cls = trl_reward(accuracy)
    assert cls().process(reward_input(extra={"difficulty": 3})).reward.reward_score == 1.0
    assert seen == {"prompts": [MSGS[:2]], "difficulty": [3]}
    assert cls().process(reward_input("5", extra={"difficulty": 1})).reward.reward_score == 0.0


def test_trl_none_fails_the_reward_and_bad_returns_raise():
    out = trl_reward(lambda completions, **kw: [None])().process(reward_input())
    assert out.status is TaskStatus.FAILED and "not applicable" in out.error
    with pytest.raises(ValueError, match="return a list of 1 float"):
        trl_reward(lambda completions, **kw: 1.0)().process(reward_input())


def test_trl_group_reward_scores_the_group_in_one_call():
    calls = []

    def longer(completions, **kwargs):
        calls.append(len(completions))
        return [float(len(c[-1]["content"])) for c in completions]

    cls = processor_for_function(longer, "group_reward")
    outs = [reward_input(c).agent_output for c in ("a", "abc")]
    res = cls().process(GroupRewardInput(agent_outputs=outs, ground_truth="x"))
    assert [r.reward_score for r in res.reward.rewards] == [1.0, 3.0] and calls == [2]


def test_verl_compute_score_number_and_dict():
    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        assert data_source == "openai/gsm8k" and extra_info == {"split": "train"}
        ok = solution_str.endswith(ground_truth)
        return {"score": float(ok), "acc": ok, "len": len(solution_str)}

    extra = {"data_source": "openai/gsm8k", "extra_info": {"split": "train"}}
    out = processor_for_function(compute_score)().process(reward_input(extra=extra))
    assert out.reward.reward_score == 1.0
    assert out.reward.reward_metrics == {"len": 15.0}  # bools are not metrics
    simple = verl_reward(lambda data_source, solution_str, ground_truth, extra_info=None: 0.5)
    assert simple().process(reward_input()).reward.reward_score == 0.5


def test_unknown_signatures_are_refused_with_the_forms():
    with pytest.raises(UserCodeError, match="neither a TRL nor a verl"):
        processor_for_function(lambda x, y: 1.0)
    with pytest.raises(UserCodeError, match="rollout must be a processor class"):
        processor_for_function(lambda completions: [1.0], "rollout")


def test_a_worker_serves_a_plain_function_by_classpath(tmp_path):
    from rltune.functions import FunctionComponentSpec, FunctionPool

    (tmp_path / "score.py").write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return 1.0 if ground_truth in solution_str else 0.0\n")

    async def run():
        spec = FunctionComponentSpec(classpath="score.py:compute_score", func_type="reward",
                                     workspace=tmp_path, runtime={"capacity": 1})
        async with await FunctionPool.start(spec) as pool:
            return [(await pool.call(reward_input(c))).reward.reward_score for c in ("4", "5")]

    assert asyncio.run(run()) == [1.0, 0.0]


def test_trl_function_gets_completion_ids_and_trainer_state():
    seen = {}

    def f(completions, completion_ids, trainer_state, **kwargs):
        seen.update(ids=completion_ids, step=trainer_state.global_step,
                    as_dict=trainer_state["global_step"])
        return [1.0] * len(completions)

    inp = reward_input()
    inp = RewardInput.model_validate({**inp.model_dump(), "completion_ids": [5, 6, 7],
                                      "trainer_state": {"global_step": 3}})
    assert trl_reward(f)().process(inp).reward.reward_score == 1.0
    assert seen == {"ids": [[5, 6, 7]], "step": 3, "as_dict": 3}
    group = GroupRewardInput.model_validate({
        "agent_outputs": [reward_input().agent_output.model_dump()] * 2,
        "completion_ids": [[1], [2, 3]], "trainer_state": {"global_step": 2}})
    out = trl_reward(f, group=True)().process(group)
    assert [r.reward_score for r in out.reward.rewards] == [1.0, 1.0]
    assert seen["ids"] == [[1], [2, 3]] and seen["step"] == 2
