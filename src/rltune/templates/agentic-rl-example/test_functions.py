"""The Bailian demo's test_functions.py: register the functions (loaded), then send each the
example input of resources/ and print the output: `python -m rltune.reinforcement
test_functions.py` (rltune serving the `dashscope…` imports)."""

import asyncio
import json

from dashscope.finetune.agentic_rl import AgenticRL
from dashscope.finetune.reinforcement import (
    FunctionComponentModel,
    GroupRewardFunctionComponent,
    RewardFunctionComponent,
    RolloutFunctionComponent,
)


async def main():
    client = AgenticRL()
    functions = [
        RolloutFunctionComponent(fcmodel=FunctionComponentModel(
            zipdir="./", classpath="functions.rollout.rollout.CalcXRolloutProcessor")),
        RewardFunctionComponent(fcmodel=FunctionComponentModel(
            zipdir="./", classpath="functions.reward.reward.DemoRewardProcessor")),
        GroupRewardFunctionComponent(fcmodel=FunctionComponentModel(
            zipdir="./", classpath="functions.reward.group_reward.DemoGroupRewardProcessor")),
    ]
    ids = await client.register_functions(functions, lazy_load=False)
    _, _, _, _rollout_ids, reward_ids, group_ids = ids
    for kind, instance in (("reward", reward_ids[0]), ("group_reward", group_ids[0])):
        with open(f"resources/{kind}_input.json") as fh:
            data = json.load(fh)
        result = await AgenticRL.test_functions(instance, kind, data)
        print(kind, json.dumps(result, default=str)[:500])


if __name__ == "__main__":
    asyncio.run(main())
