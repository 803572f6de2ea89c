"""The Ray helper without a cluster: a missing address is refused naming its user, and the
package shipped to the nodes is this rltune. (With a cluster: tests/functions/test_ray_backend.py
and tests/engine/test_ray_replicas.py, slow tier.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import rltune
from rltune import _ray
from rltune.sdk.errors import ConfigError

ray = pytest.importorskip("ray")


def test_no_address_is_refused_naming_the_user(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        pytest.skip("this process is already connected to a cluster")
    what, where = "inference_replica_backend ray", "x.inference_replica_backend"
    with pytest.raises(ConfigError) as info:
        _ray.connect(None, what=what, where=where)
    assert f": {what} needs the cluster's address" in str(info.value)
    assert info.value.where == where
    assert "RAY_ADDRESS" in info.value.hint
    assert not ray.is_initialized() and _ray._connections == 0  # nothing was counted


def test_engine_replicas_without_an_address_are_refused_before_anything_starts(monkeypatch):
    from rltune.engine.ray_replica import WHERE, start_ray_replicas

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        pytest.skip("this process is already connected to a cluster")
    with pytest.raises(ConfigError, match="cluster's address") as info:
        start_ray_replicas("/nonexistent/model", 2)
    assert info.value.where == WHERE


def test_the_shipped_package_is_this_rltune():
    (root,) = _ray.package_env()["py_modules"]
    assert Path(root) == Path(rltune.__file__).resolve().parent


def test_trainer_ranks_without_an_address_are_refused_before_anything_starts(monkeypatch):
    import torch

    from rltune.config import HyperParameters, resolve_algorithm
    from rltune.trainer.parallel.ray_ranks import WHERE, start_ray_ranked_updater

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        pytest.skip("this process is already connected to a cluster")
    hp = HyperParameters(nnodes_training=2, kl_loss_coef=0)
    with pytest.raises(ConfigError, match="cluster's address") as info:
        start_ray_ranked_updater(hp, resolve_algorithm(hp), address=None, world_size=2,
                                 model_path=Path("/nonexistent/model"),
                                 device=torch.device("cpu"), total_steps=1, pad_token_id=0)
    assert info.value.where == WHERE == "training.hyper_parameters.nnodes_training"
    assert not ray.is_initialized() and _ray._connections == 0


class _StubRay:
    """A stand-in for the ``ray`` module as an actor or a driver sees it: this node's id and
    address, and the cluster's nodes (each ``(id, address)``)."""

    def __init__(self, own: str, nodes: list[tuple[str, str]], node_id: str = "n0"):
        self.own, self.node_list, self.node_id = own, nodes, node_id
        self.util = type("util", (), {"get_node_ip_address": staticmethod(lambda: own)})
        ctx = type("ctx", (), {"get_node_id": staticmethod(lambda: node_id)})
        self.get_runtime_context = lambda: ctx

    def nodes(self) -> list[dict]:
        return [{"NodeID": i, "NodeManagerAddress": a, "Alive": True} for i, a in self.node_list]


@pytest.mark.parametrize("loop", ["127.0.0.1", "127.0.1.1", "localhost", "::1"])
def test_a_cross_host_address_is_never_loopback_when_the_cluster_spans_hosts(loop):
    # A node (or the driver) that registered a loopback address in a cluster whose other
    # nodes are elsewhere: a worker, the gateway or rank 0's store bound there would be
    # unreachable from the other hosts, so the choice is refused naming the fix.
    spans = _StubRay(loop, [("n0", loop), ("n1", "198.18.0.2")])
    with pytest.raises(ConfigError, match="spans hosts") as info:
        _ray.node_address(spans, what="rank 0's rendezvous store")
    assert "rank 0's rendezvous store" in str(info.value) and "198.18.0.2" in str(info.value)
    assert "--node-ip-address" in info.value.hint


def test_a_node_on_a_cluster_across_hosts_uses_its_own_registered_address():
    stub = _StubRay("10.9.9.9", [("n0", "198.18.0.1"), ("n1", "198.18.0.2")], node_id="n1")
    assert _ray.node_address(stub) == "198.18.0.2"  # the registered one, not Ray's guess


def test_one_host_keeps_loopback():
    stub = _StubRay("127.0.0.1", [("n0", "127.0.0.1"), ("n1", "127.0.0.1")])
    assert _ray.node_address(stub) == "127.0.0.1"


def test_the_gateway_host_on_a_cluster_across_hosts_is_the_drivers_node(monkeypatch):
    from rltune.config.components import FunctionBackend
    from rltune.functions.backends import ray_backend

    for own, expect in (("198.18.0.1", "198.18.0.1"), ("127.0.0.1", None)):
        stub = _StubRay(own, [("n0", own), ("n1", "198.18.0.2")])
        monkeypatch.setattr(ray_backend, "connect", lambda address, stub=stub: stub)
        monkeypatch.setattr(ray_backend, "disconnect", lambda: None)
        config = FunctionBackend(type="ray", address="198.18.0.1:6379")
        if expect:
            assert ray_backend.gateway_host(config) == expect
        else:
            with pytest.raises(ConfigError, match="policy gateway") as info:
                ray_backend.gateway_host(config)
            assert info.value.where == "function_backend.gateway_host"


def test_the_interface_of_an_address_is_the_one_holding_it():
    psutil = pytest.importorskip("psutil")
    loop = next(n for n, addrs in psutil.net_if_addrs().items()
                if any(a.address == "127.0.0.1" for a in addrs))
    assert _ray.interface_of("127.0.0.1") == loop
    assert _ray.interface_of("198.19.255.254") is None  # held by no interface here
