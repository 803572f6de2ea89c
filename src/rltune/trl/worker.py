"""What runs in the function workers of an ``rltune.trl`` job: the script's own callables.

``GRPOTrainer`` pickles the script's reward functions and tools (by value when they live in
the script, by reference when imported, e.g. ``trl.rewards.accuracy_reward``) into the job's
workspace, next to a two-line module that calls :func:`bind`. The worker imports that module
like any other classpath: each reward is a TRL-signature function (wrapped by
``rltune.sdk.plain`` as a group reward: the function gets a prompt's whole group, every
dataset column as a keyword), and ``ToolRollout`` is the multi-turn tool loop (the tools, and
an ``environment_factory``'s environment: one instance per rollout, whose ``get_reward()``
travels to its ``EnvironmentReward`` in the rollout's ``rollout_extra``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Optional

from rltune.sdk import (
    AbstractRolloutProcessor,
    AgentOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)
from rltune.sdk.plain import final_text

PICKLE = "trl_functions.pkl"
MODULE = "trl_functions.py"
MODULE_TEXT = ('"""Written by rltune.trl: the script\'s reward functions and tools."""\n'
               "from rltune.trl.worker import bind\n\n"
               "globals().update(bind(__file__))\n")


def run_maybe_async(value: Any) -> Any:
    """``value``, or what it resolves to when a coroutine (TRL accepts async callables)."""
    if not inspect.isawaitable(value):
        return value
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(value)  # type: ignore[arg-type]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # a loop runs here: resolve it on a thread of its own
        return pool.submit(asyncio.run, value).result()


def _accepts(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def as_trl_reward(fn: Callable[..., Any], *, standard: bool) -> Callable[..., Any]:
    """``fn`` called as TRL calls it. ``standard``: the dataset's prompts were strings, so
    the prompts and completions are strings too (the prompt's and the answer's text)."""

    def reward(completions: list[Any], **kwargs: Any) -> Any:
        if standard:
            completions = [final_text(c) for c in completions]
            kwargs["prompts"] = [_prompt_text(p) for p in kwargs.get("prompts", [])]
        kwargs["completions"] = completions
        return run_maybe_async(fn(**_accepts(fn, kwargs)))

    reward.__name__ = getattr(fn, "__name__", "reward")
    return reward


def _prompt_text(messages: list[dict[str, Any]]) -> str:
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    return str(users[-1]) if users else ""


class RewardModel:
    """TRL's string ``reward_funcs`` entry: a sequence-classification model (one label) that
    scores each prompt + completion, the chat template applied to conversational ones."""

    def __init__(self, path: str):
        self.path, self._model, self._tok = path, None, None
        self.__name__ = Path(path).name or path

    def _load(self) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self._tok = AutoTokenizer.from_pretrained(self.path)
        self._model = AutoModelForSequenceClassification.from_pretrained(
            self.path, num_labels=1).eval()
        if self._tok.pad_token is None:
            self._tok.pad_token = self._tok.eos_token
        self._model.config.pad_token_id = self._tok.pad_token_id

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        import torch

        if self._model is None:
            self._load()
        assert self._tok is not None and self._model is not None
        texts = []
        for p, c in zip(prompts, completions, strict=True):
            if isinstance(p, str):
                texts.append(p + (c if isinstance(c, str) else final_text(c)))
            else:
                texts.append(self._tok.apply_chat_template(list(p) + list(c), tokenize=False))
        batch = self._tok(texts, padding=True, truncation=True, return_tensors="pt",
                          add_special_tokens=False)
        with torch.no_grad():
            return [float(x) for x in self._model(**batch).logits[:, 0]]


#: The ``rollout_extra`` key a rollout's environment reward travels under to its reward.
ENV_REWARD = "trl_environment_reward"


def environment_methods(env: Any) -> dict[str, Callable[..., Any]]:
    """An environment's tools, as TRL picks them: its class's public functions other than
    ``reset`` and ``get_reward``, bound to ``env``."""
    return {name: getattr(env, name)
            for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


class EnvironmentReward:
    """The reward of an environment whose class defines ``get_reward``: the rollout worker
    calls it when the episode ends (the instance lives there) and this returns that value,
    logged under the class's name as TRL does."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[Optional[float]]:
        values = kwargs.get(ENV_REWARD) or [None] * len(completions)
        return [None if v is None else float(v) for v in values]


class ToolRollout(AbstractRolloutProcessor):
    """TRL's ``tools=[...]`` loop: sample through the gateway, run each tool call the model
    makes with the script's function, append the result, until an answer without calls or
    ``max_iterations`` rounds of calls. With ``environment_factory``: one new environment per
    rollout, ``reset(prompt=..., **columns)`` (a string it returns is appended to the last
    user message), its methods as tools, and its ``get_reward()`` at the end."""

    tools: ClassVar[dict[str, Callable[..., Any]]] = {}
    schemas: ClassVar[list[dict[str, Any]]] = []
    max_iterations: ClassVar[int] = 8
    environment: ClassVar[Optional[Callable[[], Any]]] = None
    standard: ClassVar[bool] = False  # string prompts: reset() gets the prompt's text

    def setup(self) -> None:
        import httpx

        self.http = httpx.AsyncClient(timeout=600.0)

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        from openai import AsyncOpenAI

        res = input_data.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value(),
                             http_client=self.http)
        params = dict(input_data.sampling_params or {})
        params.pop("max_turns", None)
        params.pop("timeout", None)
        messages = list(input_data.messages)
        extra = dict(input_data.rollout_extra or {})
        calls = failures = 0
        env = None
        try:
            if self.environment is not None:
                env = type(self).environment()  # type: ignore[misc]
                messages = await _reset(env, messages, extra, standard=self.standard)
            tools = {**self.tools, **(environment_methods(env) if env is not None else {})}
            for _ in range(self.max_iterations + 1):
                response = await client.chat.completions.create(
                    model=res.model_name, messages=messages,
                    tools=input_data.tools or self.schemas, **params)
                message = response.choices[0].message
                messages.append(message.model_dump(exclude_none=True, exclude={"refusal"}))
                if not message.tool_calls or calls >= self.max_iterations:
                    break
                calls += 1
                for call in message.tool_calls:
                    content, ok = await self._run(call.function.name, call.function.arguments,
                                                  tools)
                    failures += not ok
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "name": call.function.name, "content": content})
            if env is not None and callable(getattr(env, "get_reward", None)):
                reward = env.get_reward()
                extra[ENV_REWARD] = await reward if inspect.isawaitable(reward) else reward
        except Exception as exc:  # the endpoint or the environment failed: never scored
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=extra,
            rollout_metrics={"tool_call_rounds": float(calls),
                             "tool_failures": float(failures)}))

    async def _run(self, name: str, arguments: Any,
                   tools: Optional[dict[str, Callable[..., Any]]] = None) -> tuple[str, bool]:
        """The tool's result as text, or the error the model reads (as TRL does)."""
        fn = (self.tools if tools is None else tools).get(name)
        if fn is None:
            return json.dumps({"error": f"unknown tool {name!r}"}), False
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
            result = fn(**args)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"}), False
        return str(result), True


async def _reset(env: Any, messages: list[dict[str, Any]], extra: dict[str, Any], *,
                 standard: bool = False) -> list[dict[str, Any]]:
    """``env.reset(prompt=..., **columns)`` (the prompt as the row had it: its text when
    ``standard``, else the messages); a string it returns joins the last user message (a
    copy: the row's messages stay as they were)."""
    prompt = _prompt_text(messages) if standard else messages
    observation = env.reset(**_accepts(env.reset, {"prompt": prompt, **extra}))
    if inspect.isawaitable(observation):
        observation = await observation
    if observation is None:
        return messages
    if not isinstance(observation, str):
        raise TypeError(f"{type(env).__name__}.reset() returned a "
                        f"{type(observation).__name__}; return None or a string")
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    content = messages[last].get("content") or ""
    content = ([*content, {"type": "text", "text": observation}] if isinstance(content, list)
               else str(content) + observation)
    out = list(messages)
    out[last] = {**messages[last], "content": content}
    return out


def bind(module_file: str) -> dict[str, Any]:
    """The names the workspace module exposes: ``reward_<i>`` and ``ToolRollout``."""
    payload = pickle.loads((Path(module_file).parent / PICKLE).read_bytes())
    out: dict[str, Any] = {}
    for i, fn in enumerate(payload["rewards"]):
        out[f"reward_{i}"] = as_trl_reward(fn, standard=payload["standard"])
    tools: Optional[list[Callable[..., Any]]] = payload.get("tools")
    environment = payload.get("environment")
    if tools or environment is not None:
        out["ToolRollout"] = type("ToolRollout", (ToolRollout,), {
            "tools": {t.__name__: t for t in tools or []}, "schemas": payload["schemas"],
            "max_iterations": int(payload["max_iterations"]),
            "environment": staticmethod(environment) if environment is not None else None,
            "standard": bool(payload["standard"]),
            "__module__": __name__})
    return out
