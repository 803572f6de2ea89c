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
