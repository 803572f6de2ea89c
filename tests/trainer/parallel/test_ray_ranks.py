"""Trainer ranks as Ray actors (``rltune.trainer.parallel.ray_ranks``) on a local two-node Ray
cluster started by the test (``ray start --head`` + one worker node, each ``--block`` in its own
process group, one CPU and its own custom resource each, so one rank lands on each node): two gloo
ranks update exactly like the one-process updater on the same batch, write sharded checkpoints
(``torch.distributed.checkpoint``) that resume on two ranks and on one process to the same
weights; the full-format state (rank 0's gathered weights and optimizer state) continues on
fresh ranks; ``trainer_placement`` decides the nodes; a killed rank and a killed node fail the
next call naming the rank and the node, after which the placement group is gone and the
cluster's CPUs are free again. Slow tier (~5 min on 2 cores)."""

from __future__ import annotations

import importlib.util
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from ray_cluster import LocalRayCluster
from rltune.config import resolve_algorithm
from rltune.sdk.errors import ConfigError, TrainingFailedError
from rltune.trainer.parallel.ray_ranks import start_ray_ranked_updater
from rltune.trainer.parallel.sharded import SHARDED_DIR, consolidate
from rltune.trainer.policy import load_policy
from rltune.trainer.update import PolicyUpdater

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location(
    "dp_update", Path(__file__).parents[1] / "fixtures" / "dp_update.py")
dp_update = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp_update)

TIGHT = {"rtol": 1e-5, "atol": 2e-5}  # fp32 rounding of a sum in another order


def _hp():
    hp, _ = dp_update.hyper()
    return hp.model_copy(update={"nnodes_training": 2})


def _plain(model_dir: Path, hp) -> PolicyUpdater:
    model = load_policy(model_dir, hp, resolve_algorithm(hp), torch.device("cpu"),
                        lambda *a, **k: None)[0]
    return PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=4)


def _ranks(cluster: LocalRayCluster, model_dir: Path, hp, world: int = 2, **kw):
    return start_ray_ranked_updater(
        hp, resolve_algorithm(hp), address=cluster.address, world_size=world,
        model_path=model_dir, device=torch.device("cpu"), total_steps=4, pad_token_id=0,
        threads=1, **kw)


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) >= {k for k in want if k != "lm_head.weight"}
    for name, w in want.items():
        if name in got:
            torch.testing.assert_close(got[name], w, **TIGHT)


@pytest.fixture(scope="module")
def cluster():
    # One CPU per node and a resource naming the node: two one-CPU ranks must take one each.
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1,
                         resources=[{"node_a": 1}, {"node_b": 1}]) as c:
        yield c


async def test_two_ray_ranks_on_two_nodes_update_like_one_process_and_resume_sharded(
        cluster, tmp_path, tiny_model_dir):
    hp = _hp()
    plain = _plain(tiny_model_dir, hp)
    one = plain.update(dp_update.batch(1))
    ranked = _ranks(cluster, tiny_model_dir, hp)
    try:
        nodes = {p.node for p in ranked.transport.places}
        assert len(nodes) == 2, ranked.transport.places  # one rank per node
        two = await ranked.aupdate(dp_update.batch(1))
        weights = await ranked.afull_weights()
        _assert_same(weights, plain.model.state_dict())
        base = _plain(tiny_model_dir, hp).model.state_dict()
        assert max(float((weights[k] - base[k]).abs().max()) for k in weights) > 1e-3  # moved
        for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy"):
            assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), key
        ckpt = tmp_path / "checkpoint-1"
        ranked.save_sharded(ckpt / SHARDED_DIR)
        schedule = ranked.schedule_state()
    finally:
        await ranked.close()
    shards = sorted(p.name for p in (ckpt / SHARDED_DIR).glob("*.distcp"))
    assert len(shards) == 2, shards  # each rank wrote its own shard file
    plain.model.config.save_pretrained(ckpt)
    assert schedule["step"] == 1

    # The reference continues one more step in one process.
    plain.update(dp_update.batch(2))
    want = plain.model.state_dict()

    # Resume on one process (no process group) from the two ranks' shards.
    alone = _plain(tiny_model_dir, hp)
    alone.load_sharded(ckpt / SHARDED_DIR)
    alone.load_schedule_state(schedule)
    alone.update(dp_update.batch(2))
    _assert_same(alone.model.state_dict(), want)

    # Resume on two ranks again.
    again = _ranks(cluster, tiny_model_dir, hp)
    try:
        again.load_sharded(ckpt / SHARDED_DIR)
        again.load_schedule_state(schedule)
        await again.aupdate(dp_update.batch(2))
        _assert_same(await again.afull_weights(), want)
    finally:
        await again.close()

    # Consolidated to a Hugging Face folder: the step-1 weights, loadable as usual.
    from transformers import AutoModelForCausalLM

    out = consolidate(ckpt, tmp_path / "hf")
    loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).state_dict()
    _assert_same(loaded, weights)


async def test_full_format_state_of_ray_ranks_continues_on_other_ray_ranks(
        cluster, tiny_model_dir):
    """``checkpoint_format: full`` on Ray ranks: rank 0 gathers the whole weights and optimizer
    state in the one-process format; fresh ranks loaded from them continue exactly."""
    hp = _hp()
    plain = _plain(tiny_model_dir, hp)
    plain.update(dp_update.batch(1))
    ranked = _ranks(cluster, tiny_model_dir, hp)
    try:
        await ranked.aupdate(dp_update.batch(1))
        weights, state = await ranked.afull_weights(), ranked.state_dict()
    finally:
        await ranked.close()
    assert state["step"] == 1
    assert set(state["optimizer"]["state"]) == set(plain.optimizer.state_dict()["state"])
    plain.update(dp_update.batch(2))
    again = _ranks(cluster, tiny_model_dir, hp)
    try:
        again.load_weights(weights)
        again.load_state_dict(state)
        await again.aupdate(dp_update.batch(2))
        _assert_same(await again.afull_weights(), plain.model.state_dict())
    finally:
        await again.close()


async def test_ranks_fit_one_cpu_nodes_by_default_and_a_bigger_ask_is_named(
        cluster, tiny_model_dir):
    """The reported case: the driver runs 2 torch threads, the nodes have 1 CPU each. By
    default each rank asks for half of what the smallest node has (0.5 CPU, 1 thread), so the
    two place and train; ``trainer_cpus_per_rank: 2`` cannot place, and the error names the
    key."""
    hp, before = _hp(), torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ranked = start_ray_ranked_updater(  # threads: the driver's own (2)
            hp, resolve_algorithm(hp), address=cluster.address, world_size=2,
            model_path=tiny_model_dir, device=torch.device("cpu"), total_steps=4,
            pad_token_id=0, placement="strict_spread", place_timeout=60)
        try:
            assert len({p.node for p in ranked.transport.places}) == 2, ranked.transport.places
            metrics = await ranked.aupdate(dp_update.batch(1))
            assert metrics["actor/grad_norm"] > 0
        finally:
            await ranked.close()
        big = hp.model_copy(update={"trainer_cpus_per_rank": 2.0})
        with pytest.raises(ConfigError) as err:
            start_ray_ranked_updater(
                big, resolve_algorithm(big), address=cluster.address, world_size=2,
                model_path=tiny_model_dir, device=torch.device("cpu"), total_steps=4,
                pad_token_id=0, place_timeout=5)
        text = str(err.value)
        assert "{'CPU': 2.0} (trainer_cpus_per_rank: 2)" in text, text
        assert "trainer_cpus_per_rank" in err.value.hint
    finally:
        torch.set_num_threads(before)


async def test_a_killed_rank_fails_the_call_naming_it_and_its_placement_is_freed(
        cluster, tiny_model_dir, tmp_path):
    hp = _hp()
    ranked = _ranks(cluster, tiny_model_dir, hp, log_dir=tmp_path / "ranks")
    try:
        place = ranked.transport.places[1]
        os.kill(place.pid, signal.SIGKILL)  # rank 1's actor process; rank 0 lives on
        with pytest.raises(TrainingFailedError) as info:
            await ranked.aupdate(dp_update.batch(1))
        assert info.value.where == "trainer rank 1", info.value.message
        assert f"trainer rank 1 of 2 on {place.describe()} died during update" in \
            info.value.message
        # Each rank wrote its output to the (shared) log folder; the error quotes its tail.
        assert "its log: " in info.value.message and "rank 1 of 2 ready on cpu" in \
            info.value.message
        assert str(tmp_path / "ranks" / "rank-1.log") in info.value.hint
        assert "rank 0 of 2 ready on cpu" in (tmp_path / "ranks" / "rank-0.log").read_text()
        pg = ranked.transport.pg.id.hex()
    finally:
        await ranked.close()
    ray.init(address=cluster.address)
    try:
        deadline = time.monotonic() + 60
        while (_free_cpu(ray) < 2
               or ray.util.placement_group_table().get(pg, {}).get("state") != "REMOVED"):
            assert time.monotonic() < deadline, ray.available_resources()
            time.sleep(0.5)
    finally:
        ray.shutdown()


def _free_cpu(ray_mod) -> float:
    return ray_mod.available_resources().get("CPU", 0.0)


async def test_a_killed_node_fails_the_call_naming_rank_and_node_and_frees_the_cluster(
        tmp_path, tiny_model_dir):
    hp = _hp()
    with LocalRayCluster(head_cpus=1, worker_nodes=1, worker_cpus=1,
                         resources=[{"node_a": 1}, {"node_b": 1}]) as cluster:
        ranked = _ranks(cluster, tiny_model_dir, hp)
        try:
            worker_node = next(n["NodeID"] for n in ray.nodes() if "node_b" in n["Resources"])
            place = next(p for p in ranked.transport.places if p.node == worker_node)
            rank = place.rank
            await ranked.aupdate(dp_update.batch(1))
            os.killpg(cluster.procs[1].pid, signal.SIGKILL)  # the worker node, all of it
            with pytest.raises(TrainingFailedError) as info:
                await ranked.aupdate(dp_update.batch(2))
        finally:
            await ranked.close()
        err = info.value
        assert err.where == f"trainer rank {rank}", err.message
        assert f"trainer rank {rank} of 2 on node {worker_node[:12]} ({place.host}) died" in \
            err.message, err.message
        ray.init(address=cluster.address)
        try:
            deadline = time.monotonic() + 60
            while _free_cpu(ray) < 1 or ray.util.placement_group_table():
                table = {k: v["state"] for k, v in ray.util.placement_group_table().items()}
                if _free_cpu(ray) >= 1 and all(s == "REMOVED" for s in table.values()):
                    break
                assert time.monotonic() < deadline, (ray.available_resources(), table)
                time.sleep(0.5)
        finally:
            ray.shutdown()
        # `ray status` (the autoscaler's view, refreshed every few seconds) agrees once Ray has
        # marked the killed node dead: the head's one CPU, unused.
        deadline = time.monotonic() + 120
        while "0.0/1.0 CPU" not in (status := cluster.status()):
            assert time.monotonic() < deadline, status
            time.sleep(2)


@pytest.mark.parametrize(("placement", "nodes"), [("pack", 1), ("strict_spread", 2)])
async def test_trainer_placement_decides_the_nodes(tiny_model_dir, placement, nodes):
    """Two nodes with 2 CPUs each: ``pack`` puts both one-CPU ranks on one node,
    ``strict_spread`` one on each; either way they train together."""
    hp = _hp()
    with LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=2) as cluster:
        ranked = _ranks(cluster, tiny_model_dir, hp, placement=placement)
        try:
            assert len({p.node for p in ranked.transport.places}) == nodes, ranked.transport.places
            metrics = await ranked.aupdate(dp_update.batch(1))
            assert metrics["actor/grad_norm"] > 0
        finally:
            await ranked.close()
