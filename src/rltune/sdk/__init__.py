"""rltune's user-facing SDK: the types, processors and reward decorators user code imports.

This package never imports torch, and imports nothing else of rltune.
"""

from rltune.sdk.data import (
    AgentOutput,
    BaseDataModel,
    FunctionType,
    GroupReward,
    GroupRewardInput,
    GroupRewardOutput,
    ModelProtocol,
    ModelResource,
    RequestMetadata,
    Reward,
    RewardInput,
    RewardOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)
from rltune.sdk.loader import load_processor_class, parse_classpath
from rltune.sdk.plain import trl_reward, verl_reward
from rltune.sdk.processors import (
    AbstractGroupRewardProcessor,
    AbstractProcessor,
    AbstractRewardProcessor,
    AbstractRolloutProcessor,
    call_process,
    call_setup,
)
from rltune.sdk.rewards import (
    RewardProcessorMeta,
    aggregate_func,
    reward_func,
    sub_reward_func,
)

__all__ = [
    "AbstractGroupRewardProcessor",
    "AbstractProcessor",
    "AbstractRewardProcessor",
    "AbstractRolloutProcessor",
    "AgentOutput",
    "BaseDataModel",
    "FunctionType",
    "GroupReward",
    "GroupRewardInput",
    "GroupRewardOutput",
    "ModelProtocol",
    "ModelResource",
    "RequestMetadata",
    "Reward",
    "RewardInput",
    "RewardOutput",
    "RewardProcessorMeta",
    "RolloutInput",
    "RolloutOutput",
    "TaskStatus",
    "aggregate_func",
    "call_process",
    "call_setup",
    "load_processor_class",
    "parse_classpath",
    "reward_func",
    "sub_reward_func",
    "trl_reward",
    "verl_reward",
]
