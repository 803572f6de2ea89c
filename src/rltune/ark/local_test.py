"""``rltune ark test pipeline_plugin --fn module:func --request '<json>'``: one call of an Ark
plugin, here, with the request shape of Ark's online test instance: ``{"context": {...},
"proxy": {"url", "jwt_token"}, "sample": {...}}`` for a rollout; a grader takes
``{"context", "sample", "trajectory"}`` (``@single_grader``) or ``"trajectories"``
(``@group_grader``).

The rollout's proxy talks to ``proxy.url`` (any OpenAI-compatible endpoint: ``rltune serve``,
a gateway) in inference mode. The answer has the plugin's ``status`` and, for a rollout, the
``trajectory`` its graders would get.

Example::

    run_plugin("plugins.exact_grader:exact_grader", {
        "sample": {"messages": [{"role": "user", "content": "1+1"}], "extra": {"answer": "2"}},
        "trajectory": {"messages": [{"role": "assistant", "content": "2"}]}}, workspace=".")
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

from rltune.ark.adapters import _grader_result
from rltune.ark.plugins import plugin_spec
from rltune.ark.proxy import InferenceProxy, Mode
from rltune.ark.types import (
    ChatCompletionSample,
    PluginContext,
    PluginStatus,
    RolloutResult,
    Trajectory,
)
from rltune.sdk.errors import UserCodeError


def load_plugin(fn: str, workspace: str | Path) -> Any:
    """The decorated function ``module:func`` of the workspace (``ark_sdk`` imports served)."""
    from rltune.ark import install_as_ark_sdk

    module, sep, name = fn.partition(":")
    if not sep or not module or not name:
        raise UserCodeError(f"--fn {fn!r} is not module:function",
                            hint="write e.g. plugins.calc_rollout:calc_rollout")
    install_as_ark_sdk()
    root = str(Path(workspace).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UserCodeError(f"cannot load {fn}: {type(exc).__name__}: {exc}", where=fn,
                            hint="run it from the workspace folder (or pass --workspace)"
                            ) from None
    plugin_spec(obj)  # a clear error when it is not decorated
    return obj


def _context(request: dict[str, Any]) -> PluginContext:
    base = {"modle_customization_job_id": "local-test", "foundation_model_name": "",
            "foundation_model_version": "", "customization_type": "GRPO", "phase": "train",
            "is_mock": True}
    return PluginContext({**base, **(request.get("context") or {})})


def run_plugin(fn: str, request: dict[str, Any], *, workspace: str | Path = ".") -> dict:
    """Call the plugin once with ``request``; the JSON-ready answer."""
    obj = load_plugin(fn, workspace)
    spec = plugin_spec(obj)
    for key in ("sample",) + (("proxy",) if spec.kind == "rollout" else ()):
        if key not in request:
            raise UserCodeError(f"the request has no {key!r}", where="--request",
                                hint="a rollout takes {context, proxy: {url, jwt_token}, "
                                     "sample}; a grader {context, sample, trajectory|"
                                     "trajectories}")
    sample = ChatCompletionSample.model_validate(request["sample"])
    context = _context(request)
    if spec.kind == "rollout":
        p = request["proxy"]
        proxy = InferenceProxy(sample, url=str(p.get("url", "")),
                               jwt_token=str(p.get("jwt_token") or p.get("api_key") or "EMPTY"),
                               mode=Mode.Inference)
        result = asyncio.run(spec.call(context, proxy, sample))
        if result is not None and not isinstance(result, RolloutResult):
            result = RolloutResult.model_validate(result if isinstance(result, dict)
                                                  else result.model_dump())
        status = result.status if result else PluginStatus.SUCCESS
        trajectory = Trajectory(messages=proxy.message_dicts(), usage=proxy.usage,
                                finish_reason=proxy.finish_reason,
                                extra=result.extra if result else None)
        return {"kind": "rollout", "status": status.value,
                "error": result.error if result else "",
                "trajectory": trajectory.model_dump(mode="json", exclude_none=True)}
    if spec.kind == "single_grader":
        arg: Any = Trajectory.model_validate(request.get("trajectory") or {})
    else:
        arg = [Trajectory.model_validate(t) for t in request.get("trajectories") or []]
    graded = _grader_result(asyncio.run(spec.call(context, sample, arg)))
    return {"kind": spec.kind, "status": graded.status.value, "error": graded.error,
            "rewards": graded.rewards, "metrics": graded.metrics}
