"""setup() and process() run whether the user wrote them sync or async."""

import threading

from rltune.sdk import (
    AbstractGroupRewardProcessor,
    AbstractRolloutProcessor,
    GroupReward,
    GroupRewardInput,
    GroupRewardOutput,
    Reward,
    RolloutOutput,
    call_process,
    call_setup,
)


class SyncRollout(AbstractRolloutProcessor):
    def setup(self):
        self.ready = True

    def process(self, input_data):
        self.thread = threading.current_thread()
        return RolloutOutput(agent_output={"messages": input_data["messages"]})


class AsyncGroup(AbstractGroupRewardProcessor):
    async def setup(self):
        self.ready = True

    async def process(self, input_data: GroupRewardInput):
        n = len(input_data.agent_outputs)
        return GroupRewardOutput(
            reward=GroupReward(rewards=[Reward(reward_score=i / n) for i in range(n)])
        )


async def test_sync_setup_and_process_run_off_the_loop():
    proc = SyncRollout()
    await call_setup(proc)
    assert proc.ready
    out = await call_process(proc, {"messages": [{"role": "user", "content": "hi"}]})
    assert out.agent_output.messages[0]["content"] == "hi"
    assert proc.thread is not threading.main_thread()


async def test_async_setup_and_process_are_awaited():
    proc = AsyncGroup()
    await call_setup(proc)
    assert proc.ready
    out = await call_process(proc, GroupRewardInput(agent_outputs=[{}, {}]))
    assert [r.reward_score for r in out.reward.rewards] == [0.0, 0.5]


def test_func_types():
    assert SyncRollout.func_type.value == "rollout"
    assert AsyncGroup.func_type.value == "group_reward"
