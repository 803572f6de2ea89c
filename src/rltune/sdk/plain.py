"""Plain reward functions as processors, without writing a class.

* TRL style: ``f(completions, **kwargs) -> list[float]``. ``completions`` is a list of
  conversational completions (each the list of messages after the prompt); keyword arguments
  are ``prompts`` (the prompt messages), ``ground_truth``, ``completion_ids`` (the sampled
  token ids) and every ``rollout_extra`` key (every dataset column), each a list with one entry
  per completion, as TRL passes dataset columns, plus ``trainer_state`` (``global_step``: the
  step whose rollouts are scored, 0 in validation). ``None`` in the result
  means "not applicable" and fails that trajectory's reward (it is dropped, not scored 0).
* verl style: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` →
  a number, or a dict with ``score`` (its other numeric entries become reward metrics).
  ``solution_str`` is the last assistant message's text, ``data_source`` and ``extra_info``
  come from ``rollout_extra`` (what ``rltune data convert`` writes there).

A classpath that names such a function (``functions/score.py:compute_score``) is wrapped when
a worker loads it; a TRL function registered as a group reward gets the whole group at once.

Example:
    >>> def exact(completions, ground_truth, **kwargs):
    ...     return [float(c[-1]["content"] == g) for c, g in zip(completions, ground_truth)]
    >>> from rltune.sdk.data import RewardInput
    >>> out = trl_reward(exact)().process(RewardInput.model_validate({"ground_truth": "4",
    ...     "agent_output": {"messages": [{"role": "user", "content": "2+2?"},
    ...                                   {"role": "assistant", "content": "4"}]}}))
    >>> out.reward.reward_score
    1.0
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, Optional

from rltune.sdk.data import (
    FunctionType,
    GroupReward,
    GroupRewardOutput,
    Reward,
    RewardOutput,
    TaskStatus,
)
from rltune.sdk.errors import UserCodeError
from rltune.sdk.processors import AbstractGroupRewardProcessor, AbstractRewardProcessor


def split_prompt(messages: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(prompt, completion): the messages before the first assistant turn, and the rest."""
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            return messages[:i], messages[i:]
    return messages, []


def final_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last assistant message ('' when there is none)."""
    for m in reversed(messages):
        if m.get("role") == "assistant":
            content = m.get("content")
            if isinstance(content, list):  # content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def _call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    params = inspect.signature(fn).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(**kwargs)


def _number(value: Any, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{who} returned {value!r}; return a finite number")
    return float(value)


class TrainerState(dict[str, Any]):
    """The ``trainer_state`` keyword: a dict whose keys also read as attributes
    (``trainer_state.global_step``, as on TRL's ``TrainerState``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _trl_scores(fn: Callable[..., Any], outputs: list[Any], ground_truth: Any,
                completion_ids: Optional[list[Any]] = None,
                trainer_state: Optional[dict[str, Any]] = None) -> list[Optional[float]]:
    columns: dict[str, Any] = {"completions": [], "prompts": [], "ground_truth": []}
    extras = [o.rollout_extra or {} for o in outputs]
    for key in {k for e in extras for k in e}:
        columns.setdefault(key, [e.get(key) for e in extras])
    for o in outputs:
        prompt, completion = split_prompt(list(o.messages or []))
        columns["prompts"].append(prompt)
        columns["completions"].append(completion)
        columns["ground_truth"].append(ground_truth)
    if completion_ids is not None:
        columns["completion_ids"] = completion_ids
    columns["trainer_state"] = TrainerState(trainer_state or {})
    scores = _call(fn, columns)
    if not isinstance(scores, (list, tuple)) or len(scores) != len(outputs):
        raise ValueError(f"{fn.__name__} returned {scores!r}; return a list of "
                         f"{len(outputs)} float(s), one per completion")
    return [None if s is None else _number(s, fn.__name__) for s in scores]


def trl_reward(fn: Callable[..., Any], *, group: bool = False) -> type:
    """A reward (or, with ``group=True``, group-reward) processor class calling ``fn``."""
    if group:
        class TrlGroupReward(AbstractGroupRewardProcessor):
            def process(self, input_data: Any) -> GroupRewardOutput:
                scores = _trl_scores(fn, list(input_data.agent_outputs),
                                     input_data.ground_truth,
                                     getattr(input_data, "completion_ids", None),
                                     getattr(input_data, "trainer_state", None))
                if None in scores:
                    return GroupRewardOutput(reward=GroupReward(rewards=[]),
                                             status=TaskStatus.FAILED,
                                             error=f"{fn.__name__} returned None for a "
                                                   "completion (not applicable)")
                return GroupRewardOutput(reward=GroupReward(
                    rewards=[Reward(reward_score=s) for s in scores]))

        cls: type = TrlGroupReward
    else:
        class TrlReward(AbstractRewardProcessor):
            def process(self, input_data: Any) -> RewardOutput:
                ids = getattr(input_data, "completion_ids", None)
                (score,) = _trl_scores(fn, [input_data.agent_output], input_data.ground_truth,
                                       None if ids is None else [ids],
                                       getattr(input_data, "trainer_state", None))
                if score is None:
                    return RewardOutput(reward=Reward(reward_score=0.0),
                                        status=TaskStatus.FAILED,
                                        error=f"{fn.__name__} returned None (not applicable)")
                return RewardOutput(reward=Reward(reward_score=score))

        cls = TrlReward
    cls.__name__ = cls.__qualname__ = f"{cls.__name__}[{fn.__name__}]"
    return cls


def verl_reward(fn: Callable[..., Any]) -> type:
    """A reward processor class calling a verl ``compute_score`` function."""

    class VerlReward(AbstractRewardProcessor):
        def process(self, input_data: Any) -> RewardOutput:
            out = input_data.agent_output
            extra = dict(out.rollout_extra or {})
            truth = input_data.ground_truth
            if truth is None:
                truth = extra.get("ground_truth")
            result = _call(fn, {"data_source": extra.get("data_source"),
                                "solution_str": final_text(list(out.messages or [])),
                                "ground_truth": truth,
                                "extra_info": extra.get("extra_info", extra)})
            metrics = None
            if isinstance(result, dict):
                if "score" not in result:
                    raise ValueError(f"{fn.__name__} returned a dict without 'score': "
                                     f"{sorted(result)}")
                metrics = {k: float(v) for k, v in result.items() if k != "score"
                           and isinstance(v, (int, float)) and not isinstance(v, bool)}
                result = result["score"]
            return RewardOutput(reward=Reward(reward_score=_number(result, fn.__name__),
                                              reward_metrics=metrics or None))

    VerlReward.__name__ = VerlReward.__qualname__ = f"VerlReward[{fn.__name__}]"
    return VerlReward


def processor_for_function(fn: Callable[..., Any], func_type: Any = FunctionType.REWARD) -> type:
    """Wrap a plain function by its signature (TRL: ``completions``; verl: ``solution_str``)."""
    ftype = FunctionType(func_type)
    params = list(inspect.signature(fn).parameters)
    name = getattr(fn, "__name__", repr(fn))
    hint = ("write f(completions, **kwargs) -> list[float] (TRL) or compute_score(data_source, "
            "solution_str, ground_truth, extra_info=None) (verl), or a processor class")
    if ftype is FunctionType.ROLLOUT:
        raise UserCodeError(f"{name} is a function; a rollout must be a processor class",
                            hint="subclass AbstractRolloutProcessor")
    if params[:1] == ["completions"]:
        return trl_reward(fn, group=ftype is FunctionType.GROUP_REWARD)
    if "solution_str" in params:
        if ftype is FunctionType.GROUP_REWARD:
            raise UserCodeError(f"{name} is a verl compute_score: it scores one trajectory",
                                hint="register it as a reward, not a group_reward")
        return verl_reward(fn)
    raise UserCodeError(f"{name}({', '.join(params)}) is neither a TRL nor a verl reward "
                        "function", hint=hint)


__all__ = ["trl_reward", "verl_reward"]
