"""The worker side of ``rltune.trl``: the script's callables pickled into a workspace and
loaded back the way a function worker loads a classpath, then called as TRL calls them."""

from __future__ import annotations

import asyncio

from rltune.sdk.data import GroupRewardInput
from rltune.sdk.loader import load_processor_class
from rltune.trl.workspace import write_workspace


def length_reward(prompts, completions, size, **kwargs):
    return [float(len(c) + s) for c, s in zip(completions, size, strict=True)]


def multiply(a: int, b: int) -> int:
    """Multiplies two integers.

    Args:
        a: the first
        b: the second
    """
    return a * b


def group(prompt, answers):
    return GroupRewardInput.model_validate({"agent_outputs": [
        {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": a}],
         "rollout_extra": {"size": 100}} for a in answers]})


def test_a_standard_datasets_reward_gets_strings_for_the_whole_group(tmp_path):
    functions = write_workspace(tmp_path, rewards=[length_reward], weights=[2.0],
                                standard=True, tools=[], schemas=[], max_iterations=8)
    (entry,) = functions
    assert (entry["type"], entry["name"], entry["weight"]) == ("group_reward",
                                                               "length_reward", 2.0)
    cls = load_processor_class(entry["fcmodel"]["classpath"], tmp_path, "group_reward")
    out = cls().process(group("What is 2+2?", ["four", "4"]))
    assert [r.reward_score for r in out.reward.rewards] == [104.0, 101.0]  # str lengths + column


def test_the_tool_rollout_runs_the_scripts_tool_and_reports_its_errors(tmp_path):
    schema = {"type": "function", "function": {"name": "multiply", "parameters": {}}}
    write_workspace(tmp_path, rewards=[length_reward], weights=[1.0], standard=False,
                    tools=[multiply], schemas=[schema], max_iterations=3)
    cls = load_processor_class("trl_functions.py:ToolRollout", tmp_path, "rollout")
    assert cls.max_iterations == 3 and cls.schemas[0]["function"]["name"] == "multiply"
    rollout = cls()
    assert asyncio.run(rollout._run("multiply", '{"a": 3, "b": 4}')) == ("12", True)
    text, ok = asyncio.run(rollout._run("multiply", '{"a": 3}'))
    assert not ok and "TypeError" in text
    assert asyncio.run(rollout._run("divide", "{}"))[1] is False


def test_a_reward_model_folder_scores_each_prompt_and_completion(tiny_model_dir):
    from rltune.trl.worker import RewardModel

    score = RewardModel(str(tiny_model_dir))
    prompts = [[{"role": "user", "content": "2+2?"}]] * 2
    completions = [[{"role": "assistant", "content": "4"}],
                   [{"role": "assistant", "content": "five, I think"}]]
    out = score(prompts=prompts, completions=completions)
    assert len(out) == 2 and out[0] != out[1]  # one head output per sequence
    assert score(prompts=["2+2? "], completions=["4"]) != out[:1]  # standard: plain text


class Counter:
    """A TRL environment: reset, a tool method, and the reward it owns."""

    def reset(self, prompt, start, **kwargs):
        self.value, self.prompt = int(start), prompt
        return f" (the counter starts at {start})"

    def add(self, n: int) -> str:
        """Adds to the counter.

        Args:
            n: how much to add
        """
        self.value += n
        return str(self.value)

    def get_reward(self):
        return float(self.value)


def test_an_environment_is_reset_per_rollout_and_its_methods_are_the_tools(tmp_path):
    from rltune.trl.worker import ENV_REWARD, EnvironmentReward, _reset, environment_methods

    write_workspace(tmp_path, rewards=[EnvironmentReward("Counter")], weights=[1.0],
                    standard=False, tools=[], schemas=[], max_iterations=2,
                    environment=Counter)
    cls = load_processor_class("trl_functions.py:ToolRollout", tmp_path, "rollout")
    env = cls.environment()
    assert isinstance(env, Counter) and cls.environment() is not env  # one per rollout
    row = [{"role": "system", "content": "count"}, {"role": "user", "content": "Add 2."}]
    messages = asyncio.run(_reset(env, row, {"start": "5"}))
    assert messages[1]["content"] == "Add 2. (the counter starts at 5)"
    assert row[1]["content"] == "Add 2."  # the row itself is left as it was
    assert env.prompt == row  # conversational: the messages; standard: the prompt's text
    asyncio.run(_reset(env, row, {"start": "1"}, standard=True))
    assert env.prompt == "Add 2."
    tools = environment_methods(env)
    assert sorted(tools) == ["add"]  # reset and get_reward are not tools
    assert asyncio.run(cls()._run("add", '{"n": 2}', tools)) == ("3", True)  # 1 + 2
    score = EnvironmentReward("Counter")
    assert score(["a", "b"], **{ENV_REWARD: [7, None]}) == [7.0, None]
