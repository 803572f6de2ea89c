"""``…reinforcement.component.data.base_data_model``: inputs, outputs and enums."""

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
    Resource,
    RewardInput,
    RewardOutput,
    RolloutInput,
    RolloutOutput,
    Task,
    TaskStatus,
)

__all__ = [
    "AgentOutput",
    "BaseDataModel",
    "FunctionType",
    "GroupReward",
    "GroupRewardInput",
    "GroupRewardOutput",
    "ModelProtocol",
    "ModelResource",
    "RequestMetadata",
    "Resource",
    "RewardInput",
    "RewardOutput",
    "RolloutInput",
    "RolloutOutput",
    "Task",
    "TaskStatus",
]
