"""Two built-in engine replicas as Ray actors on a local two-node cluster (127.0.0.1, one CPU
per node) behind one ``EngineGroup``: one actor per node, requests balanced, weights shipped
once through the object store and loaded by both, request errors kept, a killed actor named by
its index, and the cluster's CPUs free again after close; then a training job whose two
replicas are engine actors (``inference_replica_backend: ray``, address from ``RAY_ADDRESS``).

Slow tier (cluster start, runtime environments, model loads, a 2-step job: ~3 min on 2 cores):
``pytest tests/engine/test_ray_replicas.py -m slow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from pathlib import Path

import pytest

from ray_cluster import LocalRayCluster

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from logprob_reference import fresh_logprobs  # noqa: E402
from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.group import EngineGroup, EngineReplicaError  # noqa: E402
from rltune.engine.ray_replica import RayEngineReplica  # noqa: E402
from rltune.engine.select import build_engine  # noqa: E402
from rltune.sdk.errors import ValidationError  # noqa: E402

pytestmark = pytest.mark.slow
NANWS = Path(__file__).parents[1] / "trainer" / "fixtures" / "nanws"


@pytest.fixture(scope="module")
def cluster():
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as c:
        yield c


def wait_cpus_free(cluster) -> None:
    ray.init(address=cluster.address)
    try:
        deadline = time.monotonic() + 30
        while ray.available_resources().get("CPU", 0.0) < 2:
            assert time.monotonic() < deadline, ray.available_resources()
            time.sleep(0.2)
    finally:
        ray.shutdown()


def req(ids, **kw):
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**kw))


async def test_two_engine_actors_behind_one_group(random_model_dir, cluster):
    from transformers import AutoModelForCausalLM

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
        # A caller that leaves (stream closed, task cancelled) frees its rows on the actor.
        replica = group.replicas[0]
        long = req(ids, max_tokens=400, ignore_eos=True)
        async with contextlib.aclosing(replica.stream(long)) as deltas:
            async for _ in deltas:
                break
        task = asyncio.create_task(replica.generate_one(long))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 30
        while (await replica.actor.stats.remote()).get("aborted", 0) < 2:
            assert time.monotonic() < deadline, "the actor kept generating for a gone caller"
            await asyncio.sleep(0.1)
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
    wait_cpus_free(cluster)


async def test_a_job_samples_with_two_engine_actors(tmp_path, tiny_model_dir, cluster,
                                                    monkeypatch):
    import yaml

    from rltune.config import load_job_config
    from rltune.templates import create_workspace
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics
    from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

    monkeypatch.setenv("RAY_ADDRESS", cluster.address)  # the functions stay local
    monkeypatch.setenv("RLTUNE_TORCH_THREADS", "1")  # one CPU per actor: the nodes have one
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=8, val_rows=2)
    shutil.copytree(NANWS / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["training"]["hyper_parameters"].update({
        **QUICK_HYPER_PARAMETERS, "max_steps": 2, "n_rollouts": 4, "eval_steps": 2,
        "save_strategy": "no", "inference_replicas": 2, "inference_replica_backend": "ray"})
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws)
    await trainer.run()

    engine = trainer.rt.engine
    assert all(isinstance(r, RayEngineReplica) for r in engine.replicas)
    assert len({r.info["node"] for r in engine.replicas}) == 2
    assert all(n > 0 for n in engine.assigned) and engine.failed == {}, engine.replica_stats()
    steps = {r["step"]: r["metrics"] for r in read_metrics(job_dir)}
    assert all(steps[s]["train/trainable_rows"] > 0 for s in (1, 2))
    assert engine.weight_version == 2 and [r.weight_version for r in engine.replicas] == [2, 2]
    assert steps[2]["trace/success_rate/agent"] == 1.0
    assert not ray.is_initialized()  # the job's close ended the actors and the connection
    wait_cpus_free(cluster)
