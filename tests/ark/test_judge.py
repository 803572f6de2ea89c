"""The built-in LLM-as-judge grader (`rltune.ark.judge`) and `from dashscope import
Generation`: against a scripted OpenAI-compatible edge (exact scores) and against a real local
endpoint, rltune's own gateway on the tiny model (loopback)."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import FastAPI, Request

from openai_edge import serve  # tests/openai_edge.py
from rltune.ark.judge import judge_config, llm_grader, llm_single_grader
from rltune.ark.types import ChatCompletionSample, PluginStatus, Trajectory

SAMPLE = ChatCompletionSample(messages=[{"role": "user", "content": "2+2?"}],
                              extra={"answer": "4"})
GROUP = [Trajectory(messages=[{"role": "assistant", "content": c}]) for c in ("4", "5")]


@pytest.fixture(scope="module")
def scripted_judge():
    """An OpenAI-compatible edge whose judge reply grades the response equal to the reference
    1 and the other 0.25; it keeps the requests."""
    app = FastAPI()
    seen: list[dict] = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("authorization")})
        text = body["messages"][-1]["content"]
        if "# Response 1" in text:  # a judge call
            n = text.count("# Response ")
            scores = [1 if f"# Response {i + 1}\n4" in text else 0.25 for i in range(n)]
            content = "Scores: " + json.dumps({"scores": scores})
        else:
            content = "4"
        return {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}}

    with serve(app) as base_url:
        yield {"url": base_url, "seen": seen}


def test_group_and_single_judge_scores(scripted_judge, monkeypatch):
    monkeypatch.setenv("JUDGE_BASE_URL", scripted_judge["url"])
    monkeypatch.setenv("JUDGE_MODEL", "grader-model")
    monkeypatch.setenv("JUDGE_API_KEY", "sk-judge")
    monkeypatch.setenv("JUDGE_RUBRIC", "prefer exact numbers")
    result = asyncio.run(llm_grader({}, SAMPLE, GROUP))
    assert result.status is PluginStatus.SUCCESS and result.rewards == [1.0, 0.25]
    assert result.metrics["judge_mean"] == pytest.approx(0.625)
    call = scripted_judge["seen"][-1]
    assert call["body"]["model"] == "grader-model" and call["auth"] == "Bearer sk-judge"
    prompt = call["body"]["messages"][-1]["content"]
    assert "# Reference answer\n4" in prompt and "prefer exact numbers" in prompt
    single = asyncio.run(llm_single_grader({}, SAMPLE, GROUP[1]))
    assert single.rewards == [0.25]
    monkeypatch.setenv("JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    failed = asyncio.run(llm_grader({}, SAMPLE, GROUP))
    assert failed.status is PluginStatus.RETRY and "ConnectError" in failed.error


def test_generation_is_dashscope_shaped_and_traceable(scripted_judge, monkeypatch):
    from rltune.reinforcement import install_as_dashscope

    monkeypatch.setenv("OPENAI_BASE_URL", scripted_judge["url"])
    monkeypatch.delenv("DASHSCOPE_BASE_URL", raising=False)
    install_as_dashscope()
    from dashscope import Generation
    from dashscope.finetune.reinforcement.component.observability import trace_client

    plain = Generation.create
    traced = trace_client(Generation)
    assert traced is Generation and Generation.create is not plain  # call goes through it
    resp = Generation.call(model="m", messages=[{"role": "user", "content": "2+2?"}],
                           result_format="message", api_key="sk-gen")
    assert resp.status_code == 200 and resp.output.choices[0].message.content == "4"
    assert resp["usage"]["input_tokens"] == 7 and resp.usage.total_tokens == 8
    assert scripted_judge["seen"][-1]["auth"] == "Bearer sk-gen"
    text = Generation.call(model="m", prompt="2+2?")
    assert text.output.text == "4"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert Generation.call(model="m", prompt="x").status_code == 599


def test_judge_against_a_real_local_model(tiny_model_dir, monkeypatch):
    """Our own gateway on the tiny model is an OpenAI-compatible judge: the call goes through;
    an untrained model's reply is no score list, so the grader asks for a retry, naming it."""
    from gateway.threaded import threaded_gateway  # tests/gateway/threaded.py

    with threaded_gateway(tiny_model_dir, static_keys=("sk-local",)) as gw:
        monkeypatch.setenv("JUDGE_BASE_URL", gw.base_url)
        monkeypatch.setenv("JUDGE_MODEL", gw.model_name)
        monkeypatch.setenv("JUDGE_API_KEY", "sk-local")
        monkeypatch.setenv("JUDGE_TIMEOUT", "120")
        assert judge_config()["base_url"] == gw.base_url.rstrip("/")
        result = asyncio.run(llm_grader({}, SAMPLE, GROUP))
    if result.status is PluginStatus.SUCCESS:  # a lucky reply: two scores in [0, 1]
        assert len(result.rewards) == 2 and all(0 <= r <= 1 for r in result.rewards)
    else:
        assert result.status is PluginStatus.RETRY
        assert "the judge's reply is not" in result.error, result.error
