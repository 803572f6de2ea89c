"""The direct-parameter options of ``rltune rl run`` turned into function components.

Per kind (rollout, reward, group reward) the lists pair up by position: the n-th name, weight,
runtime and metric-weight dict belong to the n-th classpath. A list of the wrong length, a
value that is not JSON or not a number fails with the option's name.

Example:
    >>> comps = function_components(
    ...     "./", rollout=(["functions.r.R"], ["agent"], [], "", ""),
    ...     reward=(["functions.w.W"], [], ["0.5"], '{"cpu": 1}', '[{"acc": 1.0}]'),
    ...     group_reward=([], [], [], "", ""))
    >>> [(c["type"], c.get("name"), c.get("weight")) for c in comps]
    [('rollout', 'agent', None), ('reward', None, 0.5)]
"""

from __future__ import annotations

import json
from typing import Any, Optional

from rltune.sdk.errors import ValidationError

# kind → (classpaths option, names option, weights option, runtimes option, metric option)
OPTIONS = {
    "rollout": ("--rollout-classpath", "--rollout-name", "--rollout-weight",
                "--rollout-runtime", None),
    "reward": ("--reward-classpaths", "--reward-names", "--reward-weights",
               "--reward-runtimes", "--reward-metric-weights"),
    "group_reward": ("--group-reward-classpaths", "--group-reward-names",
                     "--group-reward-weights", "--group-reward-runtimes", None),
}


def _json(text: str, option: str, example: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{option} is not JSON: {exc.msg}", where=option,
                              hint=f"write e.g. '{example}'") from None


def _per_item(values: list[Any], n: int, option: str) -> list[Any]:
    if values and len(values) != n:
        raise ValidationError(f"{option} has {len(values)} value(s) for {n} classpath(s)",
                              where=option, hint="give one value per classpath, in order")
    return values or [None] * n


def _runtimes(text: str, n: int, option: str) -> list[Optional[dict]]:
    if not text:
        return [None] * n
    value = _json(text, option, '{"cpu": 2, "concurrency": 8}')
    if isinstance(value, dict):
        return [value] * n  # one runtime for all of them
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValidationError(f"{option} must be a JSON object or a list of objects",
                              where=option, hint='write e.g. \'[{"cpu": 2}, {"cpu": 1}]\'')
    return _per_item(value, n, option)


def _weights(values: list[str], n: int, option: str) -> list[Optional[float]]:
    out = []
    for v in values:
        try:
            out.append(float(v))
        except ValueError:
            raise ValidationError(f"{option}: {v!r} is not a number", where=option,
                                  hint="write e.g. 0.7,0.3") from None
    return _per_item(out, n, option)


def function_components(workspace_dir: str, **kinds: tuple) -> list[dict[str, Any]]:
    """Component dicts from ``kind=(classpaths, names, weights, runtimes_json, metrics_json)``."""
    comps: list[dict[str, Any]] = []
    for kind, (classpaths, names, weights, runtimes, metrics) in kinds.items():
        cp_opt, name_opt, weight_opt, rt_opt, metric_opt = OPTIONS[kind]
        n = len(classpaths)
        given = [o for o, v in ((name_opt, names), (weight_opt, weights), (rt_opt, runtimes),
                                (metric_opt, metrics)) if v]
        if given and not n:
            raise ValidationError(f"{given[0]} is given without {cp_opt}", where=given[0],
                                  hint=f"add {cp_opt}, or drop {given[0]}")
        name_list = _per_item(list(names), n, name_opt)
        weight_list = _weights(list(weights), n, weight_opt)
        runtime_list = _runtimes(runtimes, n, rt_opt)
        metric_list: list[Any] = [None] * n
        if metrics:
            value = _json(metrics, metric_opt, '[{"accuracy": 0.7, "format": 0.3}]')
            value = [value] if isinstance(value, dict) else value
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ValidationError(f"{metric_opt} must be a JSON list of objects",
                                      where=metric_opt, hint='write e.g. \'[{"accuracy": 1}]\'')
            metric_list = _per_item(value, n, metric_opt)
        for cp, name, weight, runtime, metric in zip(classpaths, name_list, weight_list,
                                                     runtime_list, metric_list, strict=True):
            comp: dict[str, Any] = {"type": kind,
                                    "fcmodel": {"zipdir": workspace_dir, "classpath": cp}}
            for key, value in (("name", name), ("weight", weight), ("runtime", runtime),
                               ("reward_metric_weight", metric)):
                if value is not None:
                    comp[key] = value
            comps.append(comp)
    return comps
