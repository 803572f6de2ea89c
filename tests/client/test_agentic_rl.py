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


def test_cloud_doc_shapes_without_a_server(tmp_path):
    from rltune.client import AgenticRL
    from rltune.config import (
        AgenticRLFunctionComponent,
        FunctionComponentModel,
        JobConfig,
        RewardFunctionComponent,
        load_job_config,
    )
    from rltune.sdk.data import FunctionType

    comp = AgenticRLFunctionComponent(type=FunctionType.REWARD, name="r", weight=0.5,
                                      fcmodel=FunctionComponentModel(classpath="r.py:R"))
    job = JobConfig.load_from_dict({"model": "m", "functions": [comp]})
    assert isinstance(job.functions[0], RewardFunctionComponent)
    assert job.functions[0].weight == 0.5
    with pytest.raises(ConfigError, match="a rollout function has no weight"):
        JobConfig.load_from_dict({"model": "m", "functions": [{"type": "rollout", "weight": 2}]})
    (tmp_path / "job.yaml").write_text("job_name: from-file\nmodel: m\n")
    assert load_job_config(tmp_path / "job.yaml", name="renamed").name == "renamed"
    assert load_job_config(tmp_path / "job.yaml", job_name="other").name == "other"
    client = AgenticRL(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="run\\(\\) without init\\(\\) needs model="):
        asyncio.run(client.run())


def test_log_level_and_dashscope_key(monkeypatch, tmp_path):
    import logging

    from rltune.client import discovery
    from rltune.sdk.log_level import log_level

    assert log_level({"LOG_LEVEL": "warning"}) == logging.WARNING
    assert log_level({"LOG_LEVEL": "debug", "RLTUNE_LOG_LEVEL": "ERROR"}) == logging.ERROR
    with pytest.raises(ConfigError, match="LOG_LEVEL='loud' is not a log level"):
        log_level({"LOG_LEVEL": "loud"})
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path))
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-cloud")
    assert discovery.api_key() == "sk-cloud"
    monkeypatch.setenv("RLTUNE_API_KEY", "rk-local")
    assert discovery.api_key() == "rk-local"


def test_cli_debug_log_masks_the_key_and_a_bad_level_is_refused(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from rltune.cli.main import app

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path))
    monkeypatch.setenv("RLTUNE_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-secret-value-123")
    monkeypatch.delenv("RLTUNE_API_KEY", raising=False)
    import logging

    for name in ("", "rltune"):  # the CLI sets these levels: restore them afterwards
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    monkeypatch.setenv("LOG_LEVEL", "nonsense")
    r = CliRunner().invoke(app, ["rl", "get", "ft-1"])
    assert r.exit_code == 2 and "LOG_LEVEL='nonsense'" in r.output
    monkeypatch.setenv("LOG_LEVEL", "debug")
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: records.append(rec.getMessage())
    logging.getLogger("rltune.client").addHandler(handler)
    try:
        r = CliRunner().invoke(app, ["rl", "get", "ft-1"])
    finally:
        logging.getLogger("rltune.client").removeHandler(handler)
    assert r.exit_code == 4 and "cannot reach the rltune server" in r.output  # UNREACHABLE
    assert any("GET http://127.0.0.1:9/v1/jobs/ft-1" in m and "sk-s…(19 chars)" in m
               for m in records), records
    assert not any("sk-secret-value-123" in m for m in records)
