"""Several built-in engines behind one ``EngineGroup``: routing, weight sync to every replica,
a failed replica named by its index, and the replica keys of a job."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")

from logprob_reference import fresh_logprobs  # noqa: E402
from rltune.config.job import validate_hyper_parameters  # noqa: E402
from rltune.engine import GenerationRequest, SamplingParams  # noqa: E402
from rltune.engine.group import EngineGroup, EngineReplicaError  # noqa: E402
from rltune.engine.select import build_engine, check_engine_options  # noqa: E402
from rltune.engine.transformers_engine import TransformersEngine  # noqa: E402
from rltune.sdk.errors import ConfigError, ConflictError, ValidationError  # noqa: E402


def req(ids, **kw):
    return GenerationRequest(prompt_ids=ids, sampling=SamplingParams(**kw))


@pytest.fixture
async def group(random_model_dir):
    g = build_engine("builtin", random_model_dir, model_name="m", threads=1, max_batch_size=8,
                     replicas=2)
    yield g
    await g.close()


async def test_requests_go_to_the_replica_with_fewest_in_flight(group):
    assert isinstance(group, EngineGroup) and len(group.replicas) == 2
    ids = group.tokenizer.encode("hello there")
    await asyncio.gather(group.generate_one(req(ids, max_tokens=3, seed=1)),
                         group.generate_one(req(ids, max_tokens=3, seed=2)))
    assert group.assigned == [1, 1]  # two at once: one each

    # A long request holds one replica; the next ones all go to the other, not in turns.
    long = asyncio.create_task(group.generate_one(
        req(ids, max_tokens=120, ignore_eos=True, seed=3)))
    while sum(group.outstanding) == 0:
        await asyncio.sleep(0.001)
    busy = group.outstanding.index(1)
    tokens_before = [r.stats["tokens"] for r in group.replicas]
    for seed in range(3):
        res = await group.generate_one(req(ids, max_tokens=2, n=3, seed=seed, ignore_eos=True))
        assert len(res.completions) == 3
    assert not long.done(), "the long request ended early; the test proves nothing"
    assert group.assigned[1 - busy] == 4 and group.assigned[busy] == 2
    # the n=3 choices stayed together: 3 requests x 3 choices x 2 tokens, all on the idle one
    free_tokens = group.replicas[1 - busy].stats["tokens"] - tokens_before[1 - busy]
    assert free_tokens == 18
    await long
    assert group.outstanding == [0, 0]


async def test_streaming_is_routed_and_counted_too(group):
    ids = group.tokenizer.encode("stream me")
    deltas = [d async for d in group.stream(req(ids, max_tokens=4, ignore_eos=True, seed=0))]
    assert sum(len(d.token_ids) for d in deltas) == 4 and deltas[-1].finished is not None
    assert sum(group.assigned) == 1 and group.outstanding == [0, 0]


async def test_the_group_sums_its_replicas_token_counters(group):
    ids = group.tokenizer.encode("count the tokens of this prompt")
    await asyncio.gather(*(group.generate_one(req(ids, max_tokens=2, seed=i)) for i in range(2)))
    counters = group.token_counters()
    assert counters["prompt_tokens"] == 2 * len(ids)
    assert counters["prompt_tokens"] == sum(r.stats["prompt_tokens"] for r in group.replicas)
    assert counters["prefill_tokens"] == sum(r.stats["prefill_tokens"] for r in group.replicas)
    assert all(s["prefix_cache"]["tokens"] > 0 for s in group.replica_stats())


async def test_weight_sync_reaches_every_replica_before_the_version_moves(
        group, random_model_dir):
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(random_model_dir).eval()
    with torch.no_grad():  # "train" the policy: weights the engines do not have yet
        g = torch.Generator().manual_seed(0)
        for p in policy.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    ids = group.tokenizer.encode("What is 2 + 3?")

    async def per_replica():
        outs = []
        for r in group.replicas:
            [res] = await r.generate(req(ids, max_tokens=5, temperature=0, ignore_eos=True))
            outs.append(res.completions[0])
        return outs

    before = await per_replica()
    old = fresh_logprobs(policy, ids, before[0].completion_ids)
    assert max(abs(a - b) for a, b in zip(old, before[0].logprobs, strict=True)) > 1e-3
    assert group.weight_version == 0

    assert await group.update_weights(policy) == 1
    assert group.weight_version == 1 and [r.weight_version for r in group.replicas] == [1, 1]
    for c in await per_replica():  # every replica now samples the policy's distribution
        assert c.weight_version == 1
        want = fresh_logprobs(policy, ids, c.completion_ids)
        assert c.logprobs == pytest.approx(want, abs=1e-4)
    res = await group.generate_one(req(ids, max_tokens=2))
    assert res.weight_version == 1 and res.completions[0].weight_version == 1


async def test_a_failed_replica_is_named_and_taken_out_of_rotation(group):
    ids = group.tokenizer.encode("hi")
    with pytest.raises(ValidationError):  # the request's fault: no replica is blamed
        await group.generate_one(req([10**7]))  # turn: replica 0
    assert group.failed == {}
    await group.replicas[1].close()  # replica 1 goes down
    with pytest.raises(EngineReplicaError) as info:  # turn: replica 1
        await group.generate_one(req(ids, max_tokens=2))
    assert info.value.index == 1 and str(info.value).startswith(
        "engine replica 1: failed during generation: ConflictError: the engine is closed")
    assert info.value.http_status == 503 and list(group.failed) == [1]
    for _ in range(3):  # the others go on
        await group.generate_one(req(ids, max_tokens=2))
    assert group.assigned == [4, 1]
    state = group.replicas[0].model.state_dict()
    assert await group.update_weights(state) == 1  # the live replicas get the weights
    assert "1 failed" in group.describe()


async def test_a_replica_that_misses_an_update_is_named(random_model_dir, caplog):
    a = TransformersEngine.from_pretrained(random_model_dir, threads=1)
    b = TransformersEngine.from_pretrained(random_model_dir, threads=1)
    await b.update_weights(b.model)  # b is one version ahead: it cannot match the group
    g = EngineGroup([a, b])
    try:
        assert await g.update_weights(a.model) == 1  # a took it; b is out, named
        assert list(g.failed) == [1] and "missed an update" in g.failed[1]
        assert "replica 1" in caplog.text and "missed an update" in caplog.text
        await g.generate_one(req([5, 6], max_tokens=2))
        await g.generate_one(req([5, 6], max_tokens=2))
        assert g.assigned == [2, 0]  # out of rotation
        await a.close()  # the last live replica fails: now every call says so
        with pytest.raises(EngineReplicaError) as info:
            await g.generate_one(req([5, 6], max_tokens=2))
        assert info.value.index == 0
        with pytest.raises(ConflictError, match="every engine replica has failed"):
            await g.update_weights(a.model)
    finally:
        await g.close()


def test_replica_keys_are_validated_and_refused_where_they_cannot_act():
    hp = validate_hyper_parameters({"inference_replicas": 2, "inference_replica_backend": "ray"})
    assert (hp.inference_replicas, hp.inference_replica_backend) == (2, "ray")
    with pytest.raises(ConfigError, match="inference_replicas"):
        validate_hyper_parameters({"inference_replicas": 0})
    with pytest.raises(ConfigError, match="inference_replica_backend"):
        validate_hyper_parameters({"inference_replica_backend": "k8s"})
    with pytest.raises(ConfigError) as err:
        check_engine_options("vllm", replicas=2)
    assert err.value.where.endswith("inference_replicas")  # one vLLM per process
    assert "inference_replica_backend: ray" in err.value.hint
    with pytest.raises(ConfigError) as err:
        check_engine_options("vllm", device="cuda", replicas=2, replica_backend="ray")
    assert err.value.where.endswith("inference_replica_backend") and "CPU" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_engine_options("builtin", device="cuda", replica_backend="ray")
    assert err.value.where.endswith("inference_replica_backend") and "CPU" in str(err.value)
    check_engine_options("builtin", replicas=4)  # built-in replicas: accepted
