"""Explicit failure outputs: what a call returns when the runtime, not the user, says no.

A failed call is an output with ``status=FAILED``, an ``error`` in words and (where the model has
one) an ``error_code``. The reward value inside a failed reward output is a placeholder the
trainer must ignore: FAILED means "retry or drop", never "score 0".

Example:
    >>> out = failed_output("reward", "worker crashed", code="worker_crashed")
    >>> out.status.value, out.error_code
    ('failed', 'worker_crashed')
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError as PydanticValidationError

from rltune.sdk.data import (
    OUTPUT_MODELS,
    FunctionType,
    GroupReward,
    GroupRewardOutput,
    Reward,
    RewardOutput,
    RolloutOutput,
    TaskStatus,
)
from rltune.sdk.errors import ConfigError

# error_code values the pool sets.
WORKER_CRASHED = "worker_crashed"
WORKER_HUNG = "worker_hung"
MEMORY_EXCEEDED = "memory_exceeded"
PROCESSES_EXCEEDED = "processes_exceeded"
TIMEOUT = "timeout"
USER_EXCEPTION = "user_exception"
INVALID_OUTPUT = "invalid_output"
BAD_REQUEST = "bad_request"
OVERLOADED = "overloaded"
NO_WORKERS = "no_workers"


class PoolBroken(ConfigError):
    """The pool gave up on its function: every worker it starts is killed before it can
    serve (its baseline memory exceeds ``runtime.memory_size``). ``pool.call`` raises it,
    so the job fails with the reason instead of running on failed calls."""


def failed_output(func_type: str | FunctionType, error: str, *, code: str) -> Any:
    """The output model of ``func_type`` with status FAILED, the error and its code."""
    ftype = FunctionType(func_type)
    if ftype is FunctionType.ROLLOUT:
        return RolloutOutput(status=TaskStatus.FAILED, error=error, error_code=code)
    if ftype is FunctionType.REWARD:
        return RewardOutput(reward=Reward(reward_score=0.0), status=TaskStatus.FAILED,
                            error=error, error_code=code)
    # GroupRewardOutput has no error_code field; extra="allow" keeps it anyway.
    return GroupRewardOutput(reward=GroupReward(rewards=[]), status=TaskStatus.FAILED,
                             error=error, error_code=code)


def output_model(func_type: str | FunctionType) -> type:
    return OUTPUT_MODELS[FunctionType(func_type)]


def output_from_reply(func_type: str | FunctionType, model: type, status: int,
                      content: bytes) -> Any:
    """A worker's HTTP reply as the output ``model``; a non-200 or invalid one as FAILED."""
    text = content[:500].decode("utf-8", "replace")
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        data = {"message": text}
    if not isinstance(data, dict):
        data = {"message": text}
    if status == 200:
        try:
            return model.model_validate(data)
        except PydanticValidationError as exc:
            return failed_output(func_type, f"process() returned something that is not a "
                                            f"{model.__name__}: {exc}", code=INVALID_OUTPUT)
    message = data.get("message") or data.get("detail") or text
    if status == 500 and data.get("invalid_output"):
        return failed_output(func_type, str(message), code=INVALID_OUTPUT)
    if status == 500:
        return failed_output(func_type, f"process() raised {data.get('error_type', 'an error')}"
                                        f": {message}", code=USER_EXCEPTION)
    if status == 504:
        return failed_output(func_type, str(message), code=TIMEOUT)
    if status == 503:
        return failed_output(func_type, str(message), code=OVERLOADED)
    return failed_output(func_type, f"worker answered {status}: {message}", code=BAD_REQUEST)
