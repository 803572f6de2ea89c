"""AgenticRL without a server: config priority, merge semantics, import paths, awaitable."""

from __future__ import annotations

import asyncio

import pytest

from rltune.client.models import FineTune
from rltune.sdk.errors import ConfigError

YAML = """
name: calc
model: {name: tiny}
datasets: [{type: training, file_id: file-1}]
training: {hyper_parameters: {algorithm: grpo, batch_size: 4, learning_rate: 1.0e-4}}
"""


def test_priority_init_yaml_call_and_merge(tmp_path, monkeypatch):
    from rltune import AgenticRL  # lazy export

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path))
    (tmp_path / "job.yaml").write_text(YAML)
    client = AgenticRL(api_key="k", base_url="http://127.0.0.1:9",
                       hyper_parameters={"n_rollouts": 4, "batch_size": 2}, teacher_model=None)
    client.init(tmp_path / "job.yaml")
    hp = client.tuning.hyper_parameters
    assert (hp.batch_size, hp.n_rollouts) == (4, 4)  # YAML beats __init__, defaults fill in
    cfg = client._job_config(hyper_parameters={"learning_rate": 5e-5}, resources={"x": 1},
                             job_name="renamed")
    merged = cfg["training"]["hyper_parameters"]
    assert merged["learning_rate"] == 5e-5 and merged["batch_size"] == 4  # merged, not replaced
    assert merged["algorithm"] == "grpo" and cfg["name"] == "renamed"
    assert cfg["training"]["resources"] == {"x": 1}
    ids = client._job_config(training_file_ids=["file-9"])["datasets"]
    assert ids == [{"type": "training", "file_id": "file-9"}]


def test_bad_use_fails_clearly(tmp_path, monkeypatch):
    from rltune.client import AgenticRL

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="needs a config path"):
        AgenticRL(api_key="k").init()
    client = AgenticRL(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="unknown submit_job argument"):
        asyncio.run(client.asubmit_job(bogus=1))


def test_submit_result_is_awaitable_and_alias_import():
    ft = FineTune.of_job({"job_id": "ft-1", "status": "PENDING"})
    assert asyncio.run(_await(ft)).output.job_id == "ft-1"
    from rltune.reinforcement import install_as_dashscope

    install_as_dashscope()
    from dashscope.finetune.agentic_rl import AgenticRL

    import rltune

    assert AgenticRL is rltune.AgenticRL


async def _await(x):
    return await x
