"""Local test of the plugins over a dataset (Ark's ``plugins/test_utils.py``).

``test_with_dataset(jsonl, rollout, grader, limit, max_concurrent)`` runs the rollout over the
first ``limit`` rows, ``max_concurrent`` at a time (set it to the job's batch size to load the
plugin and its tools as training does), grades each row's trajectories and prints a line per
row and a JSON summary. The model is ``model`` (else ``LOCAL_TEST_MODEL``, else the row's),
the endpoint ``base_url`` (else ``ARK_BASE_URL``, else ``http://127.0.0.1:8000/v1``: e.g.
``rltune serve nano``), its key ``api_key`` (else ``ARK_API_KEY``).

The ``__main__`` of a rollout file calls it; from the workspace folder::

    python -m rltune.ark plugins/<rollout file>.py

Only ``ark_sdk`` names and the standard library, like the plugins: no plugin imports this file.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Optional

from ark_sdk.core.plugin.rollout.proxy import InferenceProxy, Mode
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext, PluginStatus
from ark_sdk.types.pipeline_plugin.rollout import ChatCompletionSample, Trajectory

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


def read_samples(jsonl: str, limit: Optional[int] = None) -> list[ChatCompletionSample]:
    """The dataset's samples (one JSON object a line); a bad line stops with file:line."""
    samples = []
    lines = Path(jsonl).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            samples.append(ChatCompletionSample.model_validate(json.loads(line)))
        except ValueError as exc:
            raise SystemExit(f"error: {jsonl}:{number}: not an Ark sample: {exc}") from None
        if limit is not None and len(samples) >= limit:
            break
    return samples


async def _call(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    return await result if inspect.isawaitable(result) else result


def _is_group(grader: Any) -> bool:
    """A grader whose third parameter is ``trajectories`` gets them all (``@group_grader``)."""
    names = list(inspect.signature(grader).parameters)
    return len(names) >= 3 and names[2] == "trajectories"


def _status(result: Any) -> str:
    status = getattr(result, "status", None) or PluginStatus.SUCCESS
    return str(getattr(status, "value", status))


def _rewards(result: Any) -> list[float]:
    if isinstance(result, (int, float)):
        return [float(result)]
    if isinstance(result, dict):
        return [float(r) for r in result.get("rewards", [result.get("reward", 0.0)])]
    return [float(r) for r in getattr(result, "rewards", None) or []]


async def test_with_dataset(jsonl: str, rollout: Any, grader: Any = None,
                            limit: Optional[int] = 10, max_concurrent: int = 8, *,
                            n: int = 1, model: Optional[str] = None,
                            base_url: Optional[str] = None,
                            api_key: Optional[str] = None) -> dict[str, Any]:
    """Run ``rollout`` over the dataset (``n`` trajectories a row) and grade each row."""
    model = model or os.environ.get("LOCAL_TEST_MODEL")
    url = base_url or os.environ.get("ARK_BASE_URL") or DEFAULT_BASE_URL
    key = api_key or os.environ.get("ARK_API_KEY") or "EMPTY"
    gate = asyncio.Semaphore(max(1, max_concurrent))
    latencies: list[float] = []

    def context(sample: ChatCompletionSample) -> PluginContext:
        return PluginContext(modle_customization_job_id="local-test",
                             foundation_model_name=sample.model or "",
                             foundation_model_version="", customization_type="GRPO",
                             phase="train", is_mock=True)

    async def one(sample: ChatCompletionSample) -> tuple[str, str, Any]:
        async with gate:
            start = time.monotonic()
            proxy = InferenceProxy(sample, url=url, jwt_token=key, mode=Mode.Inference)
            try:
                result = await _call(rollout, context(sample), proxy, sample)
            except Exception as exc:  # Ark counts an exception as a FAILURE
                return "failure", f"{type(exc).__name__}: {exc}", None
            finally:
                latencies.append(time.monotonic() - start)
        trajectory = Trajectory(messages=proxy.messages, usage=proxy.usage,
                                finish_reason=proxy.finish_reason,
                                extra=getattr(result, "extra", None))
        return _status(result), getattr(result, "error", "") or "", trajectory

    async def row(index: int, sample: ChatCompletionSample) -> dict[str, Any]:
        sample = sample.model_copy(update={"model": model or sample.model or "nano"})
        runs = await asyncio.gather(*(one(sample) for _ in range(n)))
        out: dict[str, Any] = {"row": index, "status": [s for s, _, _ in runs],
                               "errors": [e for _, e, _ in runs if e], "rewards": None}
        done = [t for s, _, t in runs if s == "success"]
        if grader is not None and done:
            try:
                graded = ([await _call(grader, context(sample), sample, done)]
                          if _is_group(grader) else
                          [await _call(grader, context(sample), sample, t) for t in done])
                out["rewards"] = [r for g in graded for r in _rewards(g)]
                out["errors"] += [f"grader {_status(g)}: {getattr(g, 'error', '')}"
                                  for g in graded if _status(g) != "success"]
            except Exception as exc:
                out["errors"].append(f"grader: {type(exc).__name__}: {exc}")
        turns = [len(t.messages) for t in done]
        print(f"[{index}] {'/'.join(out['status'])} rewards={out['rewards']} turns={turns}"
              + (f" errors={out['errors']}" if out["errors"] else ""), flush=True)
        return out

    started = time.monotonic()
    rows = await asyncio.gather(*(row(i, s) for i, s in enumerate(read_samples(jsonl, limit))))
    rewards = [r for out in rows for r in (out["rewards"] or [])]
    summary = {
        "samples": len(rows), "rollouts": len(rows) * n,
        "failed": sum(1 for out in rows for s in out["status"] if s != "success"),
        "mean_reward": round(statistics.fmean(rewards), 4) if rewards else None,
        "seconds": round(time.monotonic() - started, 3), "max_concurrent": max_concurrent,
        "rollout_p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "rollout_max_s": round(max(latencies), 3) if latencies else None,
        "model": model or "(the rows' model)", "base_url": url}
    print(json.dumps(summary), flush=True)
    return {**summary, "rows": rows}


test_with_dataset.__test__ = False  # not a pytest test, though its name starts with test_
