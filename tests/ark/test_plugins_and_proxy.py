"""Ark plugins served by rltune's adapters against a real gateway (tiny model): the proxy in
both modes records the trajectory while the gateway captures its tokens; graders see Ark's
sample and trajectories; DISCARD drops the whole group, FAILURE/RETRY are retried."""

from __future__ import annotations

import secrets

import pytest

from rltune.ark import install_as_ark_sdk

install_as_ark_sdk()

from ark_sdk.core.plugin.rollout.proxy import wrap_async_client_inplace  # noqa: E402
from ark_sdk.resources.pipeline_plugin import (  # noqa: E402
    group_grader,
    rollout,
    single_grader,
)
from ark_sdk.types.pipeline_plugin import GroupGraderResult  # noqa: E402
from ark_sdk.types.pipeline_plugin.rollout import (  # noqa: E402
    ChatCompletionResponse,
    PluginStatus,
    RolloutResult,
)

from rltune.gateway.rows import build_rows  # noqa: E402
from rltune.rollout.results import RolloutResult as RunResult  # noqa: E402
from rltune.rollout.rewarder import RewardComponent, Rewarder  # noqa: E402
from rltune.sdk.data import RolloutInput  # noqa: E402
from rltune.sdk.processors import call_process  # noqa: E402

openai = pytest.importorskip("openai")
pytest.importorskip("torch")


@rollout
async def wrapped(context, proxy, sample):
    client = wrap_async_client_inplace(
        openai.AsyncOpenAI(base_url=proxy.url, api_key=proxy.jwt_token), proxy=proxy)
    messages = [m.to_openai() for m in sample.messages]
    for follow_up in ("and again", None):
        # An untrained model that stops on an end token the chat template does not render
        # (<|endoftext|> here) rightly starts a new row: min_tokens = max_tokens rules that
        # out, and a seed keeps the sampled text the same.
        completion = await client.chat.completions.create(
            model="m", messages=messages, extra_body={"seed": 11, "min_tokens": 6})
        messages.append(completion.choices[0].message.model_dump(exclude_none=True))
        if follow_up:
            messages.append({"role": "user", "content": follow_up})
    return RolloutResult(extra={"seen_thinking": sample.thinking, "answer": sample.extra})


@rollout()
def raw(context, proxy, sample):  # sync: run in a thread by the decorator
    client = openai.OpenAI(base_url=proxy.url, api_key=proxy.jwt_token)
    messages = [m.to_openai() for m in sample.messages]
    proxy.update_state_from_messages(messages)
    completion = client.chat.completions.create(
        model="m", messages=messages, extra_body=proxy.get_extra_body(),
        extra_headers=proxy.headers)
    proxy.process_completion(ChatCompletionResponse(**completion.model_dump()))
    return None


@rollout
def discards(context, proxy, sample):
    return RolloutResult(status=PluginStatus.DISCARD, error="not this one")


@single_grader
def length(context, sample, trajectory):
    return float(len(trajectory.messages))


@group_grader
def judge(context, sample, trajectories):
    if sample.extra.get("skip"):
        return GroupGraderResult(status=PluginStatus.DISCARD, error="skip")
    if sample.extra.get("flaky"):
        return GroupGraderResult(status=PluginStatus.FAILURE, error="judge down")
    return GroupGraderResult(rewards=[float(i) for i in range(len(trajectories))],
                             metrics={"n": float(len(trajectories))})


class InProcess:
    """Calls a processor in this process (what a worker does after parsing the request)."""

    def __init__(self, plugin):
        self.processor = plugin.__rltune_processor__()
        self.calls = 0

    async def call(self, payload, headers=None):
        self.calls += 1
        return await call_process(self.processor, payload)


@pytest.fixture
async def gateway(tiny_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=2)
    gw = await Gateway.start(engine, host="127.0.0.1", port=0)
    yield gw
    await gw.stop(close_engine=True)


def _input(gw, key, extra):
    return RolloutInput(
        messages=[{"role": "user", "content": "what is 2 + 3?"}],
        model_resource={"model_name": "m", "base_url": gw.base_url, "api_key": key},
        sampling_params={"temperature": 1.0, "top_p": 1.0, "max_tokens": 6},
        request_metadata={"job_id": "j", "sample_id": "s", "rollout_id": "r", "attempt_id": "0"},
        extra=extra, thinking={"type": "enabled"})


async def _run(gw, plugin, extra=None):
    key, rid = "rk-" + secrets.token_hex(8), "r-" + secrets.token_hex(4)
    gw.register(key, rid)
    out = await InProcess(plugin).call(_input(gw, key, extra or {"answer": "5"}))
    gw.unregister(key)
    return out, gw.pop_calls(rid)


@pytest.mark.parametrize("plugin, calls", [(wrapped, 2), (raw, 1)])
async def test_the_proxy_records_what_the_gateway_captured(gateway, plugin, calls):
    out, captured = await _run(gateway, plugin)
    assert out.status.value == "success", out.error
    assert len(captured) == calls
    assert all(c.sampling.get("max_tokens") == 6 for c in captured)  # the job's sampling
    messages = out.agent_output.messages
    assert messages[0] == {"role": "user", "content": "what is 2 + 3?"}
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        c.response_message["content"] for c in captured]
    traj = out.agent_output.ark["trajectory"]
    assert [(m["role"], m["content"]) for m in traj["messages"]] == [
        (m["role"], m["content"]) for m in messages[1:]]
    assert traj["usage"]["completion_tokens"] == sum(len(c.completion_ids) for c in captured)
    assert len(build_rows(captured).rows) == 1  # the turns merge into one exact row
    if plugin is wrapped:  # the plugin saw the dataset row's thinking and extra
        assert traj["extra"] == {"seen_thinking": {"type": "enabled"}, "answer": {"answer": "5"}}


async def _group(gateway, extra, rollout_plugin=wrapped):
    results = []
    for k in range(3):
        out, _ = await _run(gateway, rollout_plugin, extra)
        ok = out.status.value == "success"
        results.append(RunResult(f"r{k}", "s", 0, 0, ok=ok, agent_output=out.agent_output,
                                 error=out.error, discarded=out.error_code == "discard"))
    return results


async def test_graders_score_the_group_and_discard_drops_it(gateway):
    single, group = InProcess(length), InProcess(judge)
    rewarder = Rewarder([RewardComponent("length", single, weight=1.0),
                         RewardComponent("judge", group, group=True, weight=10.0)],
                        job_id="j", max_retries=2)
    results = await _group(gateway, {"answer": "5"})
    await rewarder.score_group(results, "5")
    assert [r.score for r in results] == [3.0, 13.0, 23.0]  # 3 turns + 10 x index
    assert results[0].component_metrics["judge"] == {"n": 3.0}

    results = await _group(gateway, {"skip": True})
    calls = group.calls
    await rewarder.score_group(results, None)
    assert group.calls == calls + 1  # DISCARD is not retried
    assert all(r.discarded and r.score is None and r.reward_error for r in results)

    results = await _group(gateway, {"flaky": True})
    calls = group.calls
    await rewarder.score_group(results, None)
    assert group.calls == calls + 3  # FAILURE: retried, then the rollouts are dropped
    assert all(not r.discarded and "judge down" in r.reward_error for r in results)


async def test_a_discarding_rollout_drops_its_group_unretried(gateway):
    from rltune.rollout.runner import RolloutRunner
    from rltune.trainer.metrics import rollout_metrics

    caller = InProcess(discards)
    runner = RolloutRunner(caller, gateway, job_id="j", model_name="m",
                           sampling_params={"max_tokens": 4}, max_retries=2)
    from rltune.config.data import DataRow

    row = DataRow(messages=[{"role": "user", "content": "hi"}], extra={"answer": "1"})
    bad = await runner.run(row, rollout_id="r0", sample_id="s", sample_index=0, row_index=0)
    assert bad.discarded and not bad.ok and caller.calls == 1
    good, _ = await _run(gateway, raw)
    others = [RunResult(f"r{k}", "s", 0, 0, ok=True, agent_output=good.agent_output)
              for k in (1, 2)]
    group = [bad, *others]
    await Rewarder([RewardComponent("length", InProcess(length))], job_id="j",
                   max_retries=2).score_group(group, None)
    assert all(r.reward is None and r.discarded for r in group)
    assert rollout_metrics(group)["train/discarded_groups"] == 1.0
