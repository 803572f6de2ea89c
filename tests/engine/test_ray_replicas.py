"""Two built-in engine replicas as Ray actors on a local two-node cluster (127.0.0.1, one CPU
per node) behind one ``EngineGroup``: one actor per node, requests balanced, weights shipped
once through the object store and loaded by both, request errors kept, a killed actor named by
its index, and the cluster's CPUs free again after close.

Slow tier (cluster start, runtime environments, two model loads: ~1 min on 2 cores):
``pytest tests/engine/test_ray_replicas.py -m slow``.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from ray_cluster import LocalRayCluster

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.group import EngineGroup, EngineReplicaError  # noqa: E402
from rltune.engine.ray_replica import RayEngineReplica  # noqa: E402
from rltune.engine.select import build_engine  # noqa: E402
from rltune.sdk.errors import ValidationError  # noqa: E402

pytestmark = pytest.mark.slow


def req(ids, **kw):
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**kw))


def fresh_logprobs(model, prompt_ids, completion_ids):
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits.float(), dim=-1)[0]
    n = len(prompt_ids)
    return [lp[n - 1 + i, t].item() for i, t in enumerate(completion_ids)]


async def test_two_engine_actors_behind_one_group(random_model_dir):
    from transformers import AutoModelForCausalLM

    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as cluster:
        group = build_engine("builtin", random_model_dir, model_name="m", threads=1,
                             max_batch_size=8, replicas=2, replica_backend="ray",
                             ray_address=cluster.address)
        try:
            assert isinstance(group, EngineGroup)
            assert all(isinstance(r, RayEngineReplica) for r in group.replicas)
            assert len({r.info["node"] for r in group.replicas}) == 2  # one per node
            assert group.model_config.model_type == "qwen2"  # read on the driver
            assert ray.available_resources().get("CPU", 0.0) == 0.0  # 1 CPU each, held
            ids = group.tokenizer.encode("What is 2 + 3?")

            outs = await asyncio.gather(*(group.generate_one(req(ids, max_tokens=4, seed=s))
                                          for s in range(2)))
            assert group.assigned == [1, 1] and all(len(o.completions) == 1 for o in outs)
            deltas = [d async for d in group.stream(req(ids, max_tokens=3, ignore_eos=True))]
            assert sum(len(d.token_ids) for d in deltas) == 3
            assert deltas[-1].finished is not None
            with pytest.raises(ValidationError, match="outside the vocabulary"):
                await group.generate_one(req([10**7]))  # the actor's own error, unwrapped
            assert group.failed == {}

            policy = AutoModelForCausalLM.from_pretrained(random_model_dir).eval()
            with torch.no_grad():
                gen = torch.Generator().manual_seed(0)
                for p in policy.parameters():
                    p.add_(0.05 * torch.randn(p.shape, generator=gen))
            assert await group.update_weights(policy) == 1
            for r in group.replicas:  # both actors loaded the one shipped copy
                [res] = await r.generate(req(ids, max_tokens=5, temperature=0, ignore_eos=True))
                c = res.completions[0]
                assert r.weight_version == 1 and c.weight_version == 1
                assert c.logprobs == pytest.approx(
                    fresh_logprobs(policy, ids, c.completion_ids), abs=1e-4)

            ray.kill(group.replicas[1].actor, no_restart=True)  # replica 1's node loses it
            with pytest.raises(EngineReplicaError) as info:
                for _ in range(2):  # one of the next two requests is routed to replica 1
                    await group.generate_one(req(ids, max_tokens=2))
            assert info.value.index == 1 and list(group.failed) == [1]
            res = await group.generate_one(req(ids, max_tokens=2))  # replica 0 goes on
            assert res.weight_version == 1
        finally:
            await group.close()
        ray.init(address=cluster.address)
        try:
            deadline = time.monotonic() + 30
            while ray.available_resources().get("CPU", 0.0) < 2:
                assert time.monotonic() < deadline, ray.available_resources()
                time.sleep(0.2)
        finally:
            ray.shutdown()
