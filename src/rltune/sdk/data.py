"""Wire models of user functions: what a rollout, reward and group reward receive and return.

Field names, types, defaults and ``extra="allow"`` behaviour match the cloud Agentic-RL SDK so
that code written for it runs unchanged. Inputs keep unknown request keys as attributes.

Example:
    >>> from rltune.sdk import RolloutInput
    >>> ri = RolloutInput.model_validate({
    ...     "messages": [{"role": "user", "content": "What is 2+3?"}],
    ...     "model_resource": {"model_name": "m", "base_url": "http://x/v1", "api_key": "k"},
    ...     "trace_tag": "a"})
    >>> ri.model_resource.api_key.get_secret_value(), ri.trace_tag
    ('k', 'a')
    >>> ri.to_wire()["model_resource"]["api_key"]
    'k'
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_serializer,
)


class TaskStatus(str, Enum):
    """Outcome of one function call. FAILED means "retry or drop", never "score 0"."""

    SUCCESS = "success"
    FAILED = "failed"


#: ``error_code`` of a FAILED output meaning "drop this prompt's whole group, do not retry"
#: (Volcano Ark's ``PluginStatus.DISCARD``). The trainer counts such groups.
DISCARD_ERROR_CODE = "discard"


#: ``error_code`` of a call whose Ark plugin returned FAILURE or raised: after its retries, the
#: job fails once more than ``max_plugin_failures`` rollouts ended so (Ark fails it at once).
FAILURE_ERROR_CODE = "ark_failure"


def is_discard(output: Any) -> bool:
    """Whether a function output asks to discard the whole group (see ``DISCARD_ERROR_CODE``)."""
    return getattr(output, "error_code", None) == DISCARD_ERROR_CODE


class FunctionType(str, Enum):
    ROLLOUT = "rollout"
    REWARD = "reward"
    GROUP_REWARD = "group_reward"


class ModelProtocol(str, Enum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    DASHSCOPE = "dashscope"


class WireModel(BaseModel):
    """Base of every function wire model: ``to_wire()`` is the JSON the worker sends.

    ``model_dump(mode="json")`` masks secrets (safe for logs); ``to_wire()`` reveals them because
    the receiving process needs the real policy key.
    """

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", context={"reveal_secrets": True})


class ModelResource(WireModel):
    """The policy endpoint handed to a rollout. Injected by the trainer; never hard-code it."""

    model_name: str
    base_url: str
    api_key: SecretStr

    @field_serializer("api_key", when_used="json")
    def _dump_key(self, value: SecretStr, info: Any) -> str:
        ctx = info.context or {}
        return value.get_secret_value() if ctx.get("reveal_secrets") else str(value)


#: Validation prompts get sample ids ``<job>-val-p<i>`` (``validation_sample_id``), so every
#: function call can tell a validation rollout from a training one (``RequestMetadata.phase``).
_VALIDATION_SAMPLE = re.compile(r"-val-p\d+$")


def validation_sample_id(job_id: str, index: int) -> str:
    """The sample id of validation prompt ``index`` of ``job_id``."""
    return f"{job_id}-val-p{index}"


class RequestMetadata(WireModel):
    job_id: str
    sample_id: str
    rollout_id: str
    attempt_id: str

    @property
    def phase(self) -> str:
        """``test`` for a validation rollout (Ark's ``PluginContext.phase``), else ``train``."""
        return "test" if _VALIDATION_SAMPLE.search(self.sample_id) else "train"


class BaseDataModel(WireModel):
    """Inputs: ``func_type`` plus any extra keys the caller sent (kept as attributes)."""

    model_config = ConfigDict(extra="allow")

    func_type: FunctionType


class AgentOutput(WireModel):
    """What a rollout hands to the rewards: the conversation and optional own score."""

    model_config = ConfigDict(extra="allow")

    messages: Optional[list[dict[str, Any]]] = None
    rollout_extra: Optional[dict[str, Any]] = None
    rollout_metrics: Optional[dict[str, float]] = Field(default_factory=dict)
    reward_score: Optional[float] = None


class RolloutInput(BaseDataModel):
    func_type: FunctionType = FunctionType.ROLLOUT
    messages: list[dict[str, Any]]
    tools: Optional[list[dict[str, Any]]] = None
    ground_truth: Any = None
    rollout_extra: Optional[dict[str, Any]] = None
    sampling_params: Optional[dict[str, Any]] = None
    model_resource: ModelResource
    request_metadata: Optional[RequestMetadata] = None
    #: W3C trace context of the trainer's rollout span (also sent as the HTTP header), so the
    #: function's spans join the rollout's trace; None when tracing is off.
    traceparent: Optional[str] = None

    @model_serializer(mode="wrap")
    def _no_empty_traceparent(self, handler: Any) -> Any:
        # Absent on the cloud's wire: dump it only when set, so cloud payloads round-trip.
        data = handler(self)
        if isinstance(data, dict) and data.get("traceparent") is None:
            data.pop("traceparent", None)
        return data


class _StatusOutput(WireModel):
    model_config = ConfigDict(extra="allow")

    status: TaskStatus = TaskStatus.SUCCESS
    error: Optional[str] = None


class _CodedOutput(_StatusOutput):
    error_code: Optional[str] = None

    @field_validator("error_code", mode="before")
    @classmethod
    def _code_to_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


class RolloutOutput(_CodedOutput):
    agent_output: Optional[AgentOutput] = None


class RewardInput(BaseDataModel):
    func_type: FunctionType = FunctionType.REWARD
    ground_truth: Any = None
    request_metadata: Optional[RequestMetadata] = None
    agent_output: AgentOutput


class Reward(WireModel):
    model_config = ConfigDict(extra="allow")

    reward_score: float
    reward_metrics: Optional[dict[str, float]] = None


class RewardOutput(_CodedOutput):
    reward: Reward


class GroupRewardInput(BaseDataModel):
    func_type: FunctionType = FunctionType.GROUP_REWARD
    agent_outputs: list[AgentOutput]
    request_metadata: Optional[RequestMetadata] = None
    ground_truth: Any = None


class GroupReward(WireModel):
    """One ``Reward`` per agent output, in the same order."""

    model_config = ConfigDict(extra="allow")

    rewards: list[Reward]


class GroupRewardOutput(_StatusOutput):
    reward: GroupReward


class Task(WireModel):
    """Legacy model kept for import compatibility; rltune does not use it."""

    rollout_id: str = Field(default_factory=lambda: f"ro-{__import__('uuid').uuid4().hex[:12]}")
    prompt: Any = None
    ground_truth: Any = None
    training_state: Optional[dict[str, Any]] = None


class Resource(WireModel):
    """Legacy model kept for import compatibility; rltune does not use it."""

    model_name: str
    base_url: str
    api_key: SecretStr
    protocol: ModelProtocol = ModelProtocol.OPENAI
    max_tokens: int = 2048
    max_turns: int = 25
    sampling_params: Optional[dict[str, Any]] = None
    timeout: float = 60.0
    system_prompt: Optional[str] = None


#: Input and output model of each function type.
INPUT_MODELS: dict[FunctionType, type[BaseDataModel]] = {
    FunctionType.ROLLOUT: RolloutInput,
    FunctionType.REWARD: RewardInput,
    FunctionType.GROUP_REWARD: GroupRewardInput,
}
OUTPUT_MODELS: dict[FunctionType, type[WireModel]] = {
    FunctionType.ROLLOUT: RolloutOutput,
    FunctionType.REWARD: RewardOutput,
    FunctionType.GROUP_REWARD: GroupRewardOutput,
}


#: The wire names user code imports (``rltune.sdk``, ``rltune.reinforcement`` and the cloud
#: SDK's ``component.data`` paths re-export this list).
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
    "Reward",
    "RewardInput",
    "RewardOutput",
    "RolloutInput",
    "RolloutOutput",
    "Task",
    "TaskStatus",
]
