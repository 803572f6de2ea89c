"""A job with ``inference_replicas: 2``: the rollout runner names each prompt's group, so every
call of one rollout, and of every rollout of one prompt, reaches one built-in replica (which
then has their shared prefix's KV); two groups at once go to the two replicas."""

from __future__ import annotations

import asyncio

import openai
import pytest
import yaml

torch = pytest.importorskip("torch")

from rltune.config import load_job_config  # noqa: E402
from rltune.config.data import DataRow  # noqa: E402
from rltune.engine.group import EngineGroup  # noqa: E402
from rltune.gateway import Gateway  # noqa: E402
from rltune.rollout.groups import run_group  # noqa: E402
from rltune.rollout.runner import RolloutRunner  # noqa: E402
from rltune.sdk.data import AgentOutput, RolloutOutput  # noqa: E402
from rltune.templates import create_workspace  # noqa: E402
from rltune.trainer.runtime import build_engine  # noqa: E402


class MultiTurn:
    """A user's agent: ``turns`` chat calls, each with the conversation so far; it notes the
    prompt tokens the gateway reports per prompt group (``sample_id``)."""

    def __init__(self, turns: int):
        self.turns = turns
        self.prompt_tokens: dict[str, int] = {}

    async def call(self, input_data, *, headers=None):
        res = input_data.model_resource
        client = openai.AsyncOpenAI(base_url=res.base_url, max_retries=0,
                                    api_key=res.api_key.get_secret_value())
        messages = list(input_data.messages)
        group = input_data.request_metadata.sample_id
        for turn in range(self.turns):
            out = await client.chat.completions.create(model=res.model_name, messages=messages,
                                                       max_tokens=3, temperature=0)
            self.prompt_tokens[group] = (self.prompt_tokens.get(group, 0)
                                         + out.usage.prompt_tokens)
            messages += [{"role": "assistant", "content": out.choices[0].message.content or "x"},
                         {"role": "user", "content": f"go on ({turn})"}]
        return RolloutOutput(agent_output=AgentOutput(messages=messages))


async def test_a_groups_rollouts_and_their_turns_reach_one_replica(tmp_path, tiny_model_dir):
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=4, val_rows=2)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"]["inference_replicas"] = 2
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    engine = build_engine(load_job_config(ws / "job.yaml"), tiny_model_dir, torch.device("cpu"))
    assert isinstance(engine, EngineGroup) and len(engine.replicas) == 2
    gw = await Gateway.start(engine)
    agent = MultiTurn(turns=3)
    runner = RolloutRunner(agent, gw, job_id="j", model_name="m", sampling_params={},
                           max_retries=0)
    rows = [DataRow(messages=[{"role": "user", "content": "Add two and three."}]),
            DataRow(messages=[{"role": "user", "content": "What is the product of six, "
                                                          "seven and the number nine?"}])]
    try:
        groups = await asyncio.gather(*(
            run_group(runner, None, row, sample_id=f"j-s0-p{i}", sample_index=i, row_index=i,
                      n=3) for i, row in enumerate(rows)))
    finally:
        await gw.stop(close_engine=True)
    assert all(r.ok for g in groups for r in g)
    assert engine.assigned == [9, 9]  # 2 groups x 3 rollouts x 3 turns
    # each replica sampled exactly one group: its prompt tokens are that group's own
    per_replica = sorted(r.token_counters()["prompt_tokens"] for r in engine.replicas)
    assert per_replica == sorted(agent.prompt_tokens.values())
    assert len(set(per_replica)) == 2, "the groups' prompts must differ for this to tell"
    for r in engine.replica_stats():  # later turns and sibling rollouts hit the cached prefix
        assert r["prefix_cache"]["hits"] > 0 and r["sessions"] == 0, r  # groups ended
    assert all(r.token_counters()["prefill_tokens"] < r.token_counters()["prompt_tokens"]
               for r in engine.replicas)
