"""Processors that serve Ark plugins in rltune's function workers.

Rollout: ``RolloutInput`` → (``PluginContext``, ``InferenceProxy`` over the gateway,
``ChatCompletionSample``) → the plugin → ``RolloutOutput`` whose messages are the prompt plus
the proxy's recorded turns. The Ark view of the result (sample, trajectory with the plugin's
``extra``) travels in ``agent_output.ark`` so that graders get exactly what Ark gives them.

Status mapping: ``None``/SUCCESS → success; FAILURE, RETRY or an exception → FAILED (the trainer
retries, then drops and counts the rollout); DISCARD → FAILED with ``error_code="discard"`` (the
trainer drops the prompt's whole group without retrying and counts it).
"""

from __future__ import annotations

import traceback
from typing import Any, Optional

from rltune.ark.proxy import InferenceProxy, Mode, as_message_dict
from rltune.ark.types import (
    ChatCompletionSample,
    GroupGraderResult,
    PluginContext,
    PluginStatus,
    RolloutResult,
    Trajectory,
    Usage,
)
from rltune.sdk.data import (
    DISCARD_ERROR_CODE,
    FAILURE_ERROR_CODE,
    AgentOutput,
    FunctionType,
    GroupReward,
    GroupRewardInput,
    GroupRewardOutput,
    Reward,
    RewardInput,
    RewardOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)
from rltune.sdk.processors import AbstractProcessor

#: Sampling fields of RolloutInput.sampling_params that fill the Ark sample.
_SAMPLE_FROM_SAMPLING = {"temperature": "temperature", "top_p": "top_p",
                         "max_tokens": "max_new_tokens"}


def context_for(meta: Any, model_name: Optional[str]) -> PluginContext:
    """Ark's job context for one call (``phase``: ``test`` for a validation rollout and its
    grading, else ``train``)."""
    return PluginContext(
        modle_customization_job_id=getattr(meta, "job_id", None) or "local",
        foundation_model_name=model_name or "",
        foundation_model_version="",
        customization_type="GRPO",
        phase=getattr(meta, "phase", None) or "train",
        is_mock=False,
    )


def sample_for(input_data: RolloutInput) -> ChatCompletionSample:
    """The Ark sample of a rollout input: prompt, tools, ``extra``, ``thinking``, sampling."""
    data: dict[str, Any] = {"messages": input_data.messages, "tools": input_data.tools,
                            "model": input_data.model_resource.model_name}
    for key in ("extra", "thinking"):
        value = getattr(input_data, key, None)
        if value is not None:
            data[key] = value
    for ours, theirs in _SAMPLE_FROM_SAMPLING.items():
        value = (input_data.sampling_params or {}).get(ours)
        if value is not None:
            data[theirs] = value
    return ChatCompletionSample.model_validate(data)


def _status_output(cls: type, status: PluginStatus, error: str, **fields: Any) -> Any:
    if status is PluginStatus.DISCARD:
        return cls(status=TaskStatus.FAILED, error=error or "the plugin discarded the sample",
                   error_code=DISCARD_ERROR_CODE, **fields)
    return cls(status=TaskStatus.FAILED, error=f"{status.value}: {error or 'no error given'}",
               error_code=f"ark_{status.value}", **fields)


class ArkRolloutProcessor(AbstractProcessor):
    """Serves one ``@rollout`` plugin (``spec`` is set on the generated subclass)."""

    func_type = FunctionType.ROLLOUT
    spec: Any = None

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        sample = sample_for(input_data)
        meta = input_data.request_metadata
        proxy = InferenceProxy(
            sample, url=input_data.model_resource.base_url,
            jwt_token=input_data.model_resource.api_key.get_secret_value(), mode=Mode.Training,
            headers={"x-request-id": meta.rollout_id} if meta else {},
            sampling=input_data.sampling_params)
        try:
            result = await self.spec.call(context_for(meta, sample.model), proxy, sample)
        except Exception as exc:
            return RolloutOutput(status=TaskStatus.FAILED, error_code=FAILURE_ERROR_CODE,
                                 error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        if result is not None and not isinstance(result, RolloutResult):
            result = RolloutResult.model_validate(
                result if isinstance(result, dict) else result.model_dump())
        status = result.status if result is not None else PluginStatus.SUCCESS
        if status is not PluginStatus.SUCCESS:
            return _status_output(RolloutOutput, status, result.error if result else "")
        turns = proxy.message_dicts()
        trajectory = Trajectory(messages=turns, usage=proxy.usage,
                                finish_reason=proxy.finish_reason,
                                extra=result.extra if result else None)
        return RolloutOutput(agent_output=AgentOutput(
            messages=[as_message_dict(m) for m in sample.messages] + turns,
            rollout_extra=input_data.rollout_extra,
            rollout_metrics={"history_rewrites": float(proxy.history_rewrites)},
            ark={"sample": sample.model_dump(mode="json", exclude_none=True),
                 "trajectory": trajectory.model_dump(mode="json", exclude_none=True)},
        ))


def _ark_view(output: AgentOutput) -> tuple[ChatCompletionSample, Trajectory]:
    """The sample and trajectory of an agent output (from an Ark rollout, or rebuilt from the
    messages of any other rollout: the turns after the first assistant one's prompt)."""
    ark = getattr(output, "ark", None)
    if isinstance(ark, dict) and "sample" in ark and "trajectory" in ark:
        return (ChatCompletionSample.model_validate(ark["sample"]),
                Trajectory.model_validate(ark["trajectory"]))
    messages = list(output.messages or [])
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"),
                 len(messages))
    extra = output.rollout_extra
    sample = ChatCompletionSample(messages=messages[:first] or [{"role": "user", "content": ""}],
                                  extra=extra)
    return sample, Trajectory(messages=messages[first:], usage=Usage(),
                              finish_reason=None, extra=extra)


def _grader_result(value: Any) -> GroupGraderResult:
    if isinstance(value, GroupGraderResult):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return GroupGraderResult(rewards=[float(value)])
    if isinstance(value, dict) or hasattr(value, "model_dump"):
        data = value if isinstance(value, dict) else value.model_dump()
        if "reward" in data and "rewards" not in data:
            data = {**data, "rewards": [data.pop("reward")]}
        return GroupGraderResult.model_validate(data)
    raise TypeError(f"a grader must return a number or GroupGraderResult, got "
                    f"{type(value).__name__}")


class ArkSingleGraderProcessor(AbstractProcessor):
    """Serves one ``@single_grader`` plugin as a reward function."""

    func_type = FunctionType.REWARD
    spec: Any = None

    async def process(self, input_data: RewardInput) -> RewardOutput:
        sample, trajectory = _ark_view(input_data.agent_output)
        empty = Reward(reward_score=0.0)
        try:
            result = _grader_result(await self.spec.call(
                context_for(input_data.request_metadata, sample.model), sample, trajectory))
        except Exception as exc:
            return RewardOutput(reward=empty, status=TaskStatus.FAILED,
                                error_code=FAILURE_ERROR_CODE,
                                error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        if result.status is not PluginStatus.SUCCESS:
            return _status_output(RewardOutput, result.status, result.error, reward=empty)
        if len(result.rewards) != 1:
            return RewardOutput(reward=empty, status=TaskStatus.FAILED,
                                error=f"a single grader returned {len(result.rewards)} rewards "
                                      "for one trajectory; return one number")
        return RewardOutput(reward=Reward(reward_score=result.rewards[0],
                                          reward_metrics=result.metrics or None))


class ArkGroupGraderProcessor(AbstractProcessor):
    """Serves one ``@group_grader`` plugin as a group reward function."""

    func_type = FunctionType.GROUP_REWARD
    spec: Any = None

    async def process(self, input_data: GroupRewardInput) -> GroupRewardOutput:
        views = [_ark_view(o) for o in input_data.agent_outputs]
        sample = views[0][0] if views else ChatCompletionSample(messages=[])
        empty = GroupReward(rewards=[])
        try:
            result = _grader_result(await self.spec.call(
                context_for(input_data.request_metadata, sample.model), sample,
                [t for _, t in views]))
        except Exception as exc:
            return GroupRewardOutput(reward=empty, status=TaskStatus.FAILED,
                                     error_code=FAILURE_ERROR_CODE,
                                     error=f"{type(exc).__name__}: {exc}\n"
                                           f"{traceback.format_exc()}")
        if result.status is not PluginStatus.SUCCESS:
            return _status_output(GroupRewardOutput, result.status, result.error, reward=empty)
        metrics = result.metrics or None
        return GroupRewardOutput(reward=GroupReward(rewards=[
            Reward(reward_score=r, reward_metrics=metrics) for r in result.rewards]))


_BASES = {"rollout": ArkRolloutProcessor, "single_grader": ArkSingleGraderProcessor,
          "group_grader": ArkGroupGraderProcessor}


def processor_for(spec: Any) -> type:
    """A processor class serving ``spec`` (named after the plugin, for logs and errors)."""
    base = _BASES[spec.kind]
    return type(f"ArkPlugin_{spec.func.__name__}", (base,),
                {"spec": spec, "__module__": spec.func.__module__,
                 "__doc__": f"Ark {spec.kind} plugin {spec.name!r}."})
