"""A job submitted to a server started with ``--ray-address`` that asks for ``nnodes_training:
2``: its two trainer ranks are Ray actors on the two nodes of a local cluster (next to its
function actors), it succeeds with sharded checkpoints, publishing its checkpoint through the
REST API consolidates the shards into a model that exports and loads as a Hugging Face folder,
and afterwards ``ray status`` shows every CPU free. Slow tier (cluster start + one short job)."""

from __future__ import annotations

import signal

import pytest
import torch

from ray_cluster import LocalRayCluster
from rltune.client import AgenticRL

from .conftest import start_server
from .test_ray_jobs import _assert_cluster_free, _log, _submit, _wait, _workspace

pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def test_a_server_job_trains_on_ray_ranks_and_publishes_its_sharded_checkpoint(
        tmp_path, tiny_model_dir, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("RLTUNE_HOME", str(home))
    for var in ("RLTUNE_API_KEY", "RLTUNE_BASE_URL", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    # 2 CPUs per node: a rank and a function instance each (strict_spread: one rank per node).
    with LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=2) as cluster:
        srv = start_server(home, "--ray-address", cluster.address)
        try:
            ws = _workspace(tmp_path, tiny_model_dir, nnodes_training=2, kl_loss_coef=0.0,
                            trainer_placement="strict_spread", checkpoint_format="sharded",
                            max_steps=2, eval_steps=100)
            job_id = _submit(srv, ws)
            with srv.client() as c:
                job = _wait(c, job_id, lambda j: j["status"] in
                            ("SUCCEEDED", "FAILED", "CANCELED"), timeout=600)
                log = _log(c, job_id)
                assert job["status"] == "SUCCEEDED", log[-3000:]
                line = next(ln for ln in log.splitlines() if "data parallel on Ray" in ln)
                assert "2 trainer ranks (strict_spread placement" in line, line
                assert len({p.split(" (")[0] for p in line.split("on node ")[1:]}) == 2, line
                assert "the trainer ranks too" in log
            client = AgenticRL(api_key=srv.key, base_url=srv.url)
            client.publish_model(job_id, "multinode-tiny", checkpoint="last")
            out = client.export_model("multinode-tiny", tmp_path / "exported")
            from transformers import AutoModelForCausalLM

            from rltune.trainer.parallel.sharded import sharded_weights

            loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
            ckpts = [p for p in home.rglob("checkpoint-*") if (p / "sharded").is_dir()]
            assert ckpts, "the job wrote no sharded checkpoint"
            ckpt = max(ckpts, key=lambda p: int(p.name.split("-")[1]))
            for name, w in sharded_weights(ckpt).items():
                torch.testing.assert_close(loaded.state_dict()[name], w, rtol=0, atol=0)
        finally:
            srv.kill(signal.SIGTERM)
        _assert_cluster_free(cluster)
