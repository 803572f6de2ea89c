"""The job an ``rltune.trl.GRPOTrainer`` runs: its workspace folder and its config.

The workspace holds the datasets as JSONL (TRL's rows as they are: rltune reads TRL's shapes),
the script's reward functions, tools and environment factory pickled with ``cloudpickle``
(``trl_functions.pkl``) and the module the workers import them from (``rltune.trl.worker``),
plus a ``job.yaml`` equal to the config (``rltune train -c`` runs it again without the script).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rltune.sdk.errors import ConfigError
from rltune.trl import worker

#: Worker processes per function: one each, as TRL scores in its own process.
_RUNTIME = {"capacity": 1, "min_capacity": 1, "max_capacity": 1}


def dataset_rows(data: Any, where: str) -> list[dict[str, Any]]:
    """A ``datasets.Dataset`` or a list of dicts as rows, each with a ``prompt``."""
    if data is None:
        return []
    if type(data).__name__ in ("IterableDataset", "IterableDatasetDict"):
        raise ConfigError(f"{where} is a streaming {type(data).__name__}", where=where,
                          hint="pass a datasets.Dataset (dataset.take(n) then "
                          "Dataset.from_list(list(...))) or a list of dicts")
    if type(data).__name__ == "DatasetDict" or isinstance(data, dict):
        raise ConfigError(f"{where} is a dict of datasets", where=where,
                          hint="pass one split, e.g. dataset['train']")
    rows = data.to_list() if hasattr(data, "to_list") else list(data)
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "prompt" not in row:
            cols = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise ConfigError(f"{where} row {i} has no 'prompt' column (it has {cols})",
                              where=where, hint="each row needs a prompt (a string or a "
                              "list of chat messages), as in TRL")
    return rows


def is_standard(rows: list[dict[str, Any]]) -> bool:
    """TRL's standard format: string prompts (else conversational, lists of messages)."""
    return bool(rows) and isinstance(rows[0]["prompt"], str)


def write_rows(rows: list[dict[str, Any]], path: Path, where: str) -> str:
    lines = []
    for i, row in enumerate(rows):
        try:
            lines.append(json.dumps(row))
        except TypeError as exc:
            raise ConfigError(f"{where} row {i}: {exc}", where=where,
                              hint="columns must be JSON values (strings, numbers, lists, "
                              "dicts)") from None
    path.write_text("".join(line + "\n" for line in lines))
    return path.name


def function_name(fn: Any, taken: set[str]) -> str:
    """The component name TRL logs a reward under (``rewards/<name>``), made unique."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", getattr(fn, "__name__", "reward")).strip("-")
    name, n = base or "reward", 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _script_modules(callables: list[Any]) -> list[Any]:
    """The modules of ``callables`` that are the user's own files, not installed packages
    (``trl.rewards`` stays a reference; a ``rewards.py`` next to the script travels whole)."""
    import sys
    import sysconfig

    installed = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")}
    out = []
    for fn in callables:
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        path = getattr(module, "__file__", None)
        if module is None or module.__name__ in ("__main__", "rltune") or not path \
                or module.__name__.startswith("rltune."):
            continue
        if not any(Path(path).resolve().is_relative_to(Path(p).resolve()) for p in installed):
            out.append(module)
    return list(dict.fromkeys(out))


def write_workspace(ws: Path, *, rewards: list[Any], weights: list[float], standard: bool,
                    tools: list[Callable[..., Any]], schemas: list[dict[str, Any]],
                    max_iterations: int, environment: Any = None) -> list[dict[str, Any]]:
    """Pickle the callables into ``ws`` and return the job's ``functions`` entries."""
    try:
        import cloudpickle
    except ImportError:
        raise ConfigError("rltune.trl needs cloudpickle to send the script's functions to "
                          "the workers", where="GRPOTrainer",
                          hint="pip install 'rltune[trl]'") from None

    own = _script_modules([*rewards, *tools, *([environment] if environment else [])])
    for module in own:  # by value: the workers cannot import the script's own modules
        cloudpickle.register_pickle_by_value(module)
    try:
        (ws / worker.PICKLE).write_bytes(cloudpickle.dumps({
            "rewards": rewards, "standard": standard, "tools": tools, "schemas": schemas,
            "max_iterations": max_iterations, "environment": environment}))
    finally:
        for module in own:
            cloudpickle.unregister_pickle_by_value(module)
    (ws / worker.MODULE).write_text(worker.MODULE_TEXT)
    functions: list[dict[str, Any]] = []
    if tools or environment is not None:
        functions.append({"type": "rollout", "name": "tools", "timeout": 600,
                          "fcmodel": {"classpath": f"{worker.MODULE}:ToolRollout"},
                          "runtime": {**_RUNTIME, "concurrency": 64}})
    taken: set[str] = set()
    for i, (fn, weight) in enumerate(zip(rewards, weights, strict=True)):
        functions.append({"type": "group_reward", "name": function_name(fn, taken),
                          "weight": float(weight),
                          "fcmodel": {"classpath": f"{worker.MODULE}:reward_{i}"},
                          "runtime": {**_RUNTIME, "concurrency": 64}})
    return functions
