"""Hugging Face models: a Qwen-style stand-in loaded by path and by hub id from a pre-filled HF
cache (offline), the job/CLI refusing a missing hub model before anything starts, the chat
template's ``chat_template_kwargs`` through a real gateway and the openai client, and reasoning
kept. The stand-in (tests/hf_standin.py) is rltune's tiny Qwen2 with a Qwen-style tokenizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from rltune.engine.types import Completion, GenerationResult
from rltune.models.registry import resolve_model
from rltune.paths import check_model, hf_cache_dir
from rltune.sdk.errors import NotFoundError

REPO = "acme/qwen-standin"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


@pytest.fixture
def standin(hf_standin_dir) -> Path:
    return hf_standin_dir


def test_resolves_by_path_and_by_hub_id_from_the_cache(hf_home, standin):
    assert resolve_model(str(standin)) == standin.resolve()
    snapshot = resolve_model(REPO)
    assert hf_cache_dir() == hf_home / "hub"
    assert snapshot.parent.parent.name == "models--acme--qwen-standin"
    assert snapshot.name == (snapshot.parent.parent / "refs" / "main").read_text()
    source = check_model(REPO)
    assert (source.kind, source.path) == ("hub", snapshot)
    assert "cached at" in source.describe()
    # what transformers loads from the snapshot is the stand-in
    from rltune.engine.transformers_engine import load_tokenizer

    tok = load_tokenizer(snapshot)
    assert tok.convert_tokens_to_ids("</think>") == len(tok) - 1
    assert "<think>" in tok.chat_template


def test_a_missing_hub_id_offline_says_how_to_get_it(hf_home):
    with pytest.raises(NotFoundError) as err:
        check_model("acme/absent", what="teacher_model")
    msg = str(err.value)
    assert err.value.where == "teacher_model"
    assert "'acme/absent' is not in the Hugging Face cache" in msg and "HF_HUB_OFFLINE" in msg
    assert "hf download acme/absent" in msg
    with pytest.raises(NotFoundError, match="not a hub id"):
        check_model("./no/such/dir/x")


def _job_yaml(tmp_path: Path, model: str, **model_keys) -> Path:
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"q{i}"}]})
                            + "\n" for i in range(4)))
    cfg = {"name": "hf", "model": {"name": model, **model_keys},
           "datasets": [{"type": "training", "file_name": str(data)}],
           "training": {"hyper_parameters": {"batch_size": 2, "n_rollouts": 2}}}
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(cfg))
    return path


def _rltune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rltune.cli.main", *args], cwd=cwd,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=120)


def test_train_refuses_a_missing_hub_model_before_anything_starts(hf_home, tmp_path):
    job = _job_yaml(tmp_path, "acme/absent")
    out = tmp_path / "run"
    proc = _rltune("train", "-c", str(job), "-O", str(out), "-q", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "'acme/absent' is not in the Hugging Face cache" in proc.stderr
    assert "job ft-" not in proc.stdout + proc.stderr  # no banner
    assert not out.exists() and not (tmp_path / "runs").exists()  # no run directory
    # a model of a family without a known tool-call parser: refused as early
    import shutil

    odd = tmp_path / "odd-family"
    shutil.copytree(resolve_model(REPO), odd)
    cfg = json.loads((odd / "config.json").read_text())
    (odd / "config.json").unlink()  # a link into the cache's blobs: replace, do not write
    (odd / "config.json").write_text(json.dumps({**cfg, "model_type": "gemma3",
                                                 "architectures": ["Gemma3ForCausalLM"]}))
    proc = _rltune("train", "-c", str(_job_yaml(tmp_path, str(odd))), "-O", str(out), "-q",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "no tool-call parser is known" in proc.stderr, proc.stderr
    assert not out.exists()


def test_chat_template_kwargs_key_validates():
    from rltune.config import JobConfig
    from rltune.sdk.errors import ConfigError

    job = JobConfig.load_from_dict({"model": {"name": "nano",
                                              "chat_template_kwargs": {"enable_thinking": False}}})
    assert job.model.chat_template_kwargs == {"enable_thinking": False}
    with pytest.raises(ConfigError, match="tools"):
        JobConfig.load_from_dict({"model": {"name": "nano", "chat_template_kwargs": {"tools": []}}})


async def test_chat_template_kwargs_take_effect_through_the_gateway(hf_home):
    """The job's enable_thinking=False closes an empty think block in every prompt (4 more
    tokens); a request's own chat_template_kwargs override it."""
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway.server import Gateway

    engine = TransformersEngine.from_pretrained(resolve_model(REPO), threads=1)
    gw = await Gateway.start(engine, static_keys=("k",),
                             chat_template_kwargs={"enable_thinking": False})
    plain = Gateway(engine)  # same engine, no template kwargs (not served: render only)
    try:
        client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="k")
        msgs = [{"role": "user", "content": "Weather in Paris?"}]

        async def prompt_tokens(**extra) -> int:
            r = await client.chat.completions.create(model="m", messages=msgs, tools=[WEATHER],
                                                     max_tokens=2, extra_body=extra or None)
            return r.usage.prompt_tokens

        off = await prompt_tokens()
        on = await prompt_tokens(chat_template_kwargs={"enable_thinking": True})
        expected = engine.tokenizer.encode("<think>\n\n</think>\n\n", add_special_tokens=False)
        assert off - on == len(expected) and len(expected) >= 2
        from rltune.gateway.protocol import ChatCompletionRequest

        default = plain.chat.prepare(ChatCompletionRequest(messages=msgs, tools=[WEATHER]))
        assert len(default.prompt_ids) == on  # no key: the template's own default
        with pytest.raises(openai.BadRequestError, match="may not set tools"):
            await prompt_tokens(chat_template_kwargs={"tools": []})
    finally:
        await gw.stop()
        await engine.close()


class _Scripted:
    """An engine that answers with fixed token ids: what a Qwen3 model sampled."""

    model_name, max_context, weight_version = "qwen3-like", 4096, 0

    def __init__(self, tok, model, text: str):
        self.tokenizer, self.model = tok, model
        self.ids = [*tok.encode(text, add_special_tokens=False), tok.eos_token_id]

    def _completion(self) -> Completion:
        return Completion(completion_ids=self.ids, logprobs=[-0.1] * len(self.ids),
                          finish_reason="stop")

    async def generate_one(self, request) -> GenerationResult:
        return GenerationResult(prompt_ids=request.prompt_ids, completions=[self._completion()])

    async def stream(self, request):
        from rltune.engine.types import TokenDelta

        c = self._completion()
        for k, t in enumerate(c.completion_ids):
            yield TokenDelta(token_ids=[t], logprobs=[-0.1],
                             finished=c if k == len(c.completion_ids) - 1 else None)


QWEN3_OUTPUT = ("<think>\nThe user wants the weather, so I call the tool.\n</think>\n\n"
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                "</tool_call>")


async def test_reasoning_is_kept_and_renders_back_to_the_sampled_tokens(standin):
    """A Qwen3-style output (think block, then a Hermes tool call) through the real tokenizer:
    reasoning_content and the tool call come apart, streaming agrees, and the assistant message
    sent back renders to exactly the prompt plus the sampled text."""
    from transformers import AutoConfig

    from rltune.engine.transformers_engine import load_tokenizer
    from rltune.gateway.server import Gateway

    tok = load_tokenizer(standin)
    model = type("M", (), {"config": AutoConfig.from_pretrained(standin)})()
    gw = await Gateway.start(_Scripted(tok, model, QWEN3_OUTPUT), static_keys=("k",))
    try:
        client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="k")
        msgs = [{"role": "user", "content": "Weather in Paris?"}]
        r = await client.chat.completions.create(model="m", messages=msgs, tools=[WEATHER])
        msg = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls"
        assert msg.reasoning_content == "The user wants the weather, so I call the tool."
        assert msg.content is None
        assert [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls] \
            == [("get_weather", {"city": "Paris"})]
        stream = await client.chat.completions.create(model="m", messages=msgs, tools=[WEATHER],
                                                      stream=True)
        reasoning, content, calls = "", "", []
        async for chunk in stream:
            for ch in chunk.choices:
                reasoning += getattr(ch.delta, "reasoning_content", None) or ""
                content += ch.delta.content or ""
                calls += [c.function.name for c in ch.delta.tool_calls or []]
        assert (reasoning, content, calls) == (msg.reasoning_content, "", ["get_weather"])
        # sent back (as the openai client would), the template renders the sampled text again
        back = msg.model_dump(exclude_none=True)
        prompt = tok.apply_chat_template(msgs, tools=[WEATHER], tokenize=False,
                                         add_generation_prompt=True)
        history = [*msgs, back, {"role": "tool", "tool_call_id": msg.tool_calls[0].id,
                                 "content": "18 C"}]
        from rltune.gateway.chat import _message_dict
        from rltune.gateway.protocol import ChatMessage

        rendered = tok.apply_chat_template(
            [_message_dict(ChatMessage(**m), False) for m in history], tools=[WEATHER],
            tokenize=False, add_generation_prompt=True)
        assert rendered.startswith(prompt + QWEN3_OUTPUT + "<|im_end|>")
    finally:
        await gw.stop()


def test_without_a_closing_think_tag_everything_is_content():
    from rltune.gateway.chat import split_reasoning

    assert split_reasoning("The answer is 5.") == (None, "The answer is 5.")
    assert split_reasoning("<think>\nstill thinking", partial=True) == (None, "")
    assert split_reasoning("<thi", partial=True) == (None, "")
    assert split_reasoning("\n\nok</think>\n\nfine") == ("ok", "fine")


def test_online_download_failure_is_clear_and_early(hf_home, tmp_path):
    """Downloads on (no HF_HUB_OFFLINE) but the hub unreachable: the same early refusal."""
    job = _job_yaml(tmp_path, "acme/absent")
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE",
                                                           "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_ETAG_TIMEOUT="2", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "rltune.cli.main", "train", "-c", str(job),
                           "-O", str(out), "-q"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "downloading acme/absent from the Hugging Face hub" in proc.stderr
    assert "could not download 'acme/absent'" in proc.stderr
    assert not out.exists()


def test_a_template_that_opens_the_think_block_itself():
    """Templates that end the prompt with <think> (Qwen3 thinking-2507 style): the completion
    has only the closing tag; cut off before it, all of it is reasoning."""
    from rltune.gateway.chat import split_reasoning

    assert split_reasoning("\nweigh it\n</think>\n\nok", opened=True) == ("weigh it", "ok")
    assert split_reasoning("\nweigh it", opened=True, partial=True) == (None, "")
    assert split_reasoning("\nweigh it", opened=True) == ("weigh it", "")


async def test_the_job_key_reaches_the_training_gateway(hf_home, tmp_path):
    """model.chat_template_kwargs of a job: the runtime's policy gateway renders with them."""
    from rltune.config import JobConfig
    from rltune.gateway.protocol import ChatCompletionRequest
    from rltune.trainer.runtime import TrainingRuntime

    job = JobConfig.load_from_dict({"model": {"name": REPO, "chat_template_kwargs": {
        "enable_thinking": False}}})
    async with TrainingRuntime(job, job_dir=tmp_path / "job", base_dir=tmp_path, job_id="ft-t",
                               total_steps=1, log=lambda *a, **k: None) as rt:
        p = rt.gateway.chat.prepare(ChatCompletionRequest(
            messages=[{"role": "user", "content": "hi"}]))
        assert rt.tokenizer.decode(p.prompt_ids).endswith(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n")
