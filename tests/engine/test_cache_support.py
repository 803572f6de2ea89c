"""The built-in engine refuses sliding-window and hybrid caches, naming ``engine: vllm``."""

from __future__ import annotations

import json
import shutil

import pytest

from rltune.engine.cache_support import cache_problem
from rltune.sdk.errors import ConfigError


@pytest.mark.parametrize("config", [
    {"model_type": "mistral", "sliding_window": 4096, "max_position_embeddings": 32768},
    {"model_type": "gemma3_text", "layer_types": ["sliding_attention", "full_attention"]},
    {"model_type": "qwen3_next", "layer_types": ["linear_attention", "full_attention"]},
    {"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text"}},
    {"model_type": "x", "text_config": {"layer_types": ["full_attention", "mamba"]}},
    {"model_type": "jamba", "layers_block_type": ["mamba", "attention"]},
])
def test_hybrid_and_windowed_configs_are_named(config):
    assert cache_problem(config)


@pytest.mark.parametrize("config", [
    {"model_type": "qwen2", "sliding_window": 32768, "use_sliding_window": False,
     "max_window_layers": 28, "layer_types": ["full_attention"] * 4},
    {"model_type": "mistral", "sliding_window": None},
    {"model_type": "llama", "sliding_window": 8192, "max_position_embeddings": 8192},
    {"model_type": "qwen3"},
])
def test_plain_full_attention_configs_pass(config):
    assert cache_problem(config) is None


@pytest.mark.parametrize("change", [
    {"sliding_window": 16, "use_sliding_window": True},
    {"layer_types": ["full_attention", "linear_attention"]},
])
def test_the_engine_refuses_before_loading_weights(tmp_path, tiny_model_dir, change):
    from rltune.engine.transformers_engine import TransformersEngine

    model = tmp_path / "m"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    assert cache_problem(config) is None  # the tiny model itself is served
    (model / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ConfigError) as err:
        TransformersEngine.from_pretrained(model)
    assert "use `engine: vllm`" in err.value.hint and "built-in engine" in str(err.value)
