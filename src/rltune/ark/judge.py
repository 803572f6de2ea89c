"""A built-in LLM-as-judge grader (Ark's ``llm_grader``; a RULER-style group judge, as in
OpenPipe ART): one call to any OpenAI-compatible endpoint scores all the trajectories of a
prompt against each other (and the reference answer, when the sample has one).

Use it as an Ark plugin wherever a job names a grader: ``rltune.ark.judge:llm_grader``
(``@group_grader``) or ``rltune.ark.judge:llm_single_grader`` (``@single_grader``). The judge
is configured by its plugin's ``envs`` (or the environment): ``JUDGE_BASE_URL`` (default
``OPENAI_BASE_URL``), ``JUDGE_MODEL`` (default ``OPENAI_MODEL``, else ``judge``),
``JUDGE_API_KEY`` (default ``OPENAI_API_KEY``), ``JUDGE_RUBRIC`` (extra instructions),
``JUDGE_TIMEOUT`` (seconds, 120). A local model served by ``rltune serve`` is such an endpoint.

A reply that is not ``{"scores": [...]}`` with one number in [0, 1] per trajectory makes the
grader return RETRY with the reply in the error (the trainer retries, then drops the rollouts).

Example:
    >>> parse_scores('Here: {"scores": [1, 0.25, 7]}', 3)
    [1.0, 0.25, 1.0]
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, Optional

import httpx

from rltune.ark.plugins import group_grader, single_grader
from rltune.ark.types import ChatCompletionSample, GroupGraderResult, PluginStatus, Trajectory
from rltune.sdk.errors import JudgeError

SYSTEM = (
    "You are a strict grader. You see a task, optionally its reference answer, and several "
    "candidate responses to it. Score every response from 0 (wrong or useless) to 1 (fully "
    "correct and helpful), comparing them with each other: a better response gets a higher "
    'score. Reply with JSON only: {"scores": [one number per response, in order]}.')


def judge_config(env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    e = os.environ if env is None else env
    return {"base_url": (e.get("JUDGE_BASE_URL") or e.get("OPENAI_BASE_URL")
                         or "http://127.0.0.1:8000/v1").rstrip("/"),
            "model": e.get("JUDGE_MODEL") or e.get("OPENAI_MODEL") or "judge",
            "api_key": e.get("JUDGE_API_KEY") or e.get("OPENAI_API_KEY") or "EMPTY",
            "rubric": e.get("JUDGE_RUBRIC") or "",
            "timeout": float(e.get("JUDGE_TIMEOUT") or 120)}


def parse_scores(reply: str, n: int) -> list[float]:
    """The ``n`` scores in a judge reply (clamped to [0, 1]), or ``JudgeError``."""
    match = re.search(r"\{.*\}", reply or "", re.S)
    try:
        scores = json.loads(match.group(0))["scores"] if match else None
    except (json.JSONDecodeError, KeyError, TypeError):
        scores = None
    if not isinstance(scores, list) or len(scores) != n or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
        raise JudgeError(f"the judge's reply is not {{\"scores\": [{n} numbers]}}: "
                         f"{(reply or '')[:300]!r}")
    return [min(1.0, max(0.0, float(s))) for s in scores]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p)
                        for p in content)
    return str(content or "")


def judge_messages(sample: ChatCompletionSample, answers: list[str],
                   rubric: str = "") -> list[dict[str, str]]:
    task = "\n".join(f"{m.role}: {_text(m.content)}" for m in sample.messages
                     if m.role in ("system", "user"))
    extra = sample.extra or {}
    reference = next((extra[k] for k in ("answer", "solution", "ground_truth") if k in extra),
                     None)
    parts = [f"# Task\n{task}"]
    if reference is not None:
        parts.append(f"# Reference answer\n{reference}")
    parts += [f"# Response {i + 1}\n{a}" for i, a in enumerate(answers)]
    if rubric:
        parts.append(f"# Rubric\n{rubric}")
    parts.append(f'Reply with {{"scores": [...]}} holding {len(answers)} numbers.')
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _answer(t: Trajectory) -> str:
    return next((_text(m.content) for m in reversed(t.messages) if m.role == "assistant"), "")


async def judge(sample: ChatCompletionSample, trajectories: list[Trajectory],
                config: Optional[dict[str, Any]] = None) -> list[float]:
    """One score per trajectory from one judge call (``JudgeError`` when unreadable)."""
    cfg = config or judge_config()
    body = {"model": cfg["model"], "temperature": 0.0, "max_tokens": 64 + 16 * len(trajectories),
            "messages": judge_messages(sample, [_answer(t) for t in trajectories],
                                       cfg["rubric"])}
    async with httpx.AsyncClient(timeout=cfg["timeout"]) as http:
        resp = await http.post(cfg["base_url"] + "/chat/completions", json=body,
                               headers={"Authorization": f"Bearer {cfg['api_key']}"})
    if resp.status_code != 200:
        raise JudgeError(f"the judge at {cfg['base_url']} answered {resp.status_code}: "
                         f"{resp.text[:300]}")
    reply = _text(resp.json()["choices"][0]["message"].get("content"))
    return parse_scores(reply, len(trajectories))


@group_grader(name="llm_grader", description="LLM-as-judge over the whole group (RULER-style)")
async def llm_grader(context: Any, sample: ChatCompletionSample,
                     trajectories: list[Trajectory]) -> GroupGraderResult:
    try:
        scores = await judge(sample, trajectories)
    except (JudgeError, httpx.HTTPError) as exc:
        return GroupGraderResult(status=PluginStatus.RETRY, error=f"{type(exc).__name__}: {exc}")
    return GroupGraderResult(rewards=scores, metrics={"judge_mean": sum(scores) / len(scores)})


@single_grader(name="llm_single_grader", description="LLM-as-judge, one trajectory at a time")
async def llm_single_grader(context: Any, sample: ChatCompletionSample,
                            trajectory: Trajectory) -> GroupGraderResult:
    try:
        (score,) = await judge(sample, [trajectory])
    except (JudgeError, httpx.HTTPError) as exc:
        return GroupGraderResult(status=PluginStatus.RETRY, error=f"{type(exc).__name__}: {exc}")
    return GroupGraderResult(rewards=[score])
