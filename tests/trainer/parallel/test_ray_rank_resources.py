"""What one Ray trainer rank asks the cluster for (``trainer_cpus_per_rank``, its default on
the CPU and on CUDA), and where the key is accepted. No cluster needed; the placement on a
local cluster of 1-CPU nodes is in ``test_ray_ranks.py`` (slow tier)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from rltune.config.job import validate_hyper_parameters
from rltune.sdk.errors import ConfigError
from rltune.trainer.parallel.ray_ranks import rank_resources, smallest_node_cpus


def test_a_cpu_rank_asks_for_the_drivers_threads_but_fits_the_smallest_node():
    # the reported case: 2 torch threads in the driver, nodes of 1 CPU
    # (at most half of it: the job's functions and engine replicas go on the same nodes)
    assert rank_resources(False, threads=2, smallest_node=1.0) == ({"CPU": 0.5}, 1)
    assert rank_resources(False, threads=2, smallest_node=16.0) == ({"CPU": 2.0}, 2)
    assert rank_resources(False, threads=4, smallest_node=2.5) == ({"CPU": 1.0}, 1)
    assert rank_resources(False, threads=4, smallest_node=5.0) == ({"CPU": 2.0}, 2)
    assert rank_resources(False, threads=1, smallest_node=2.0) == ({"CPU": 1.0}, 1)
    assert rank_resources(False, threads=2) == ({"CPU": 2.0}, 2)  # cluster size unknown


def test_trainer_cpus_per_rank_sets_the_request_and_the_threads():
    assert rank_resources(False, threads=2, cpus_per_rank=4, smallest_node=1.0) == (
        {"CPU": 4.0}, 4)  # set: taken as given, even past the smallest node
    assert rank_resources(False, threads=2, cpus_per_rank=0.5) == ({"CPU": 0.5}, 1)
    assert rank_resources(True, threads=2) == ({"GPU": 1.0, "CPU": 1.0}, 2)  # CUDA default
    assert rank_resources(True, threads=2, cpus_per_rank=6) == ({"GPU": 1.0, "CPU": 6.0}, 6)


def test_the_smallest_node_counts_live_nodes_with_cpus():
    nodes = [{"Alive": True, "Resources": {"CPU": 8.0}},
             {"Alive": True, "Resources": {"CPU": 1.0, "node_b": 1.0}},
             {"Alive": False, "Resources": {"CPU": 0.5}},  # dead: not a place for a rank
             {"Alive": True, "Resources": {"GPU": 1.0}}]  # no CPUs at all
    assert smallest_node_cpus(nodes) == 1.0
    assert smallest_node_cpus([]) is None


def test_trainer_cpus_per_rank_is_accepted_with_nnodes_training_only():
    hp = validate_hyper_parameters({"nnodes_training": 2, "trainer_cpus_per_rank": 0.5})
    assert hp.trainer_cpus_per_rank == 0.5
    with pytest.raises(ConfigError) as err:
        validate_hyper_parameters({"trainer_cpus_per_rank": 1})
    assert "trainer_cpus_per_rank" in str(err.value) and "nnodes_training" in str(err.value)
    with pytest.raises(ConfigError, match="trainer_cpus_per_rank"):
        validate_hyper_parameters({"nnodes_training": 2, "trainer_cpus_per_rank": 0})
