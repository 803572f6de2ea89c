"""LLM-as-judge group grader, as in Ark's ``rl_search_mcp_demo``: one request to an
OpenAI-compatible judge compares the group's answers with the reference and returns a score
in [0, 1] for each. Configure it with the plugin's ``envs`` in job.yaml: ``JUDGE_BASE_URL``,
``JUDGE_MODEL``, ``JUDGE_API_KEY``. (rltune also ships this grader built in:
``rltune.ark.judge:llm_grader``.)"""

from __future__ import annotations

import json
import os
import re

from ark_sdk.resources.pipeline_plugin import group_grader
from ark_sdk.types.pipeline_plugin import GroupGraderResult
from ark_sdk.types.pipeline_plugin.pipeline_plugin import PluginContext, PluginStatus
from ark_sdk.types.pipeline_plugin.rollout import ChatCompletionSample, Trajectory
from openai import AsyncOpenAI, OpenAIError

INSTRUCTIONS = ("Grade each numbered answer to the question against the reference: 1 fully "
                "right, 0 wrong, in between for partly right; rank them against each other. "
                'Return only JSON like {"scores": [0.5, 1]}, one score per answer.')


def parse_scores(text: str, n: int) -> list[float]:
    """The ``n`` scores of the judge's reply, clamped to [0, 1]; a ValueError that quotes the
    reply when it holds no ``{"scores": [n numbers]}``."""
    found = re.search(r"\{.*\}", text, re.S)
    try:
        scores = json.loads(found.group(0))["scores"] if found else None
        scores = [min(1.0, max(0.0, float(s))) for s in scores]
    except (ValueError, KeyError, TypeError):
        scores = None
    if scores is None or len(scores) != n:
        raise ValueError(f'the judge\'s reply is not {{"scores": [{n} numbers]}}: '
                         f"{text[:300]!r}")
    return scores


def last_answer(t: Trajectory) -> str:
    texts = [m.content for m in t.messages if m.role == "assistant" and isinstance(m.content, str)]
    return texts[-1] if texts else ""


@group_grader(name="llm_grader")
async def llm_grader(context: PluginContext, sample: ChatCompletionSample,
                     trajectories: list[Trajectory]) -> GroupGraderResult:
    question = next((m.content for m in reversed(sample.messages) if m.role == "user"), "")
    numbered = "\n".join(f"{i + 1}. {last_answer(t)}" for i, t in enumerate(trajectories))
    prompt = (f"Question: {question}\nReference: {(sample.extra or {}).get('answer', '')}\n"
              f"Answers:\n{numbered}")
    judge = AsyncOpenAI(base_url=os.environ.get("JUDGE_BASE_URL", "http://127.0.0.1:8000/v1"),
                        api_key=os.environ.get("JUDGE_API_KEY", "EMPTY"))
    try:
        reply = await judge.chat.completions.create(
            model=os.environ.get("JUDGE_MODEL", "judge"), temperature=0,
            messages=[{"role": "system", "content": INSTRUCTIONS},
                      {"role": "user", "content": prompt}])
        scores = parse_scores(reply.choices[0].message.content or "", len(trajectories))
    except (OpenAIError, ValueError) as exc:
        return GroupGraderResult(status=PluginStatus.RETRY, error=f"judge failed: {exc}")
    return GroupGraderResult(rewards=scores, metrics={"judge_mean": sum(scores) / len(scores)})
