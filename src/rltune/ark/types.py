"""Data types of Volcano Ark's RL plugin interface, as pydantic models.

A rollout plugin gets a :class:`PluginContext`, an inference proxy and a
:class:`ChatCompletionSample` (the dataset row) and returns ``None`` or a
:class:`RolloutResult`; a grader gets the sample and one :class:`Trajectory` (``@single_grader``)
or all of them (``@group_grader``) and returns a score or a :class:`GroupGraderResult`.

Example:
    >>> s = ChatCompletionSample.model_validate({
    ...     "messages": [{"role": "user", "content": "2+3?"}],
    ...     "extra": {"answer": "5"}, "thinking": {"type": "enabled"}})
    >>> s.messages[0].content, s.extra["answer"], s.thinking["type"], s.max_new_tokens
    ('2+3?', '5', 'enabled', 4096)
    >>> PluginStatus("discard") is PluginStatus.DISCARD
    True
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from rltune.config.compat.ark_source import PluginInstance


class PluginStatus(str, Enum):
    """Outcome of a plugin call. rltune: FAILURE and RETRY are retried (then the rollout is
    dropped and counted); DISCARD drops the prompt's whole group at once and counts it."""

    SUCCESS = "success"
    FAILURE = "failure"
    DISCARD = "discard"
    RETRY = "retry"


class Runtime(BaseModel):
    """A plugin's runtime (decorator ``runtime=``). See :func:`rltune.ark.job` for how the
    job translation maps it onto the function pool."""

    model_config = ConfigDict(extra="forbid")

    instance: PluginInstance = PluginInstance.CPU1MEM2
    timeout: Optional[int] = Field(None, ge=1, le=900)
    max_concurrency: int = Field(10, ge=1, le=100)
    min_replicas: Optional[int] = Field(None, ge=0)
    max_replicas: Optional[int] = Field(None, ge=1)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class PluginContext(dict):
    """Dict-like job context (Ark spells the job id key ``modle_customization_job_id``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class FunctionCall(_Open):
    name: str
    arguments: str = "{}"


class ToolCall(_Open):
    id: str = "user_defined"
    type: str = "function"
    function: FunctionCall


class ChatCompletionMessage(_Open):
    role: str
    content: Union[str, list[Any], None] = None
    tool_calls: Optional[list[ToolCall]] = None
    reasoning_content: Optional[str] = ""

    def to_openai(self) -> dict[str, Any]:
        """The message as an OpenAI chat message dict (empty optional fields left out)."""
        data = self.model_dump(exclude_none=True)
        if not data.get("reasoning_content"):
            data.pop("reasoning_content", None)
        if not data.get("tool_calls"):
            data.pop("tool_calls", None)
        return data


class ChatCompletionSample(_Open):
    """One dataset row: the prompt plus Ark's sampling fields, ``extra`` and ``thinking``."""

    model: Optional[str] = None
    n: int = 1
    max_new_tokens: int = 4096
    top_p: float = 1.0
    top_k: int = 0
    temperature: float = 1.0
    messages: list[ChatCompletionMessage]
    tools: Optional[list[dict[str, Any]]] = None
    thinking: Optional[dict[str, Any]] = None
    extra: Optional[dict[str, Any]] = None


class Usage(_Open):
    completion_tokens: int = 0
    prompt_tokens: int = 0
    total_tokens: int = 0


class Trajectory(_Open):
    """What one rollout produced: the assistant/tool turns after the prompt."""

    messages: list[ChatCompletionMessage] = Field(default_factory=list)
    usage: Optional[Usage] = None
    finish_reason: Optional[str] = None
    extra: Optional[dict[str, Any]] = None


#: The doc's local grader test builds trajectories as ``ChatCompletion(messages=..., ...)``.
ChatCompletion = Trajectory


class Choice(_Open):
    index: int = 0
    message: ChatCompletionMessage
    finish_reason: Optional[str] = None


class ChatCompletionResponse(_Open):
    """A chat-completions response, as the raw rollout passes it to ``process_completion``."""

    id: Optional[str] = None
    model: Optional[str] = None
    choices: list[Choice]
    usage: Optional[Usage] = None


class RolloutResult(_Open):
    """Optional rollout return value; ``extra`` reaches the graders as ``Trajectory.extra``."""

    status: PluginStatus = PluginStatus.SUCCESS
    error: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)


class GroupGraderResult(_Open):
    """A grader's answer: one reward per trajectory (in order) and step metrics."""

    rewards: list[float] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    status: PluginStatus = PluginStatus.SUCCESS
    error: str = ""


#: The Ark docs' other name for the grader result.
RewardFunctionResult = GroupGraderResult

__all__ = [
    "ChatCompletion",
    "ChatCompletionMessage",
    "ChatCompletionResponse",
    "ChatCompletionSample",
    "Choice",
    "FunctionCall",
    "GroupGraderResult",
    "PluginContext",
    "PluginInstance",
    "PluginStatus",
    "RewardFunctionResult",
    "RolloutResult",
    "Runtime",
    "ToolCall",
    "Trajectory",
    "Usage",
]
