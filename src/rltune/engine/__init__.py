"""Inference engines: token ids in, sampled token ids and log-probs out.

``TransformersEngine`` is the built-in continuous-batching engine, ``VLLMEngine`` runs vLLM
in-process (``engine: vllm``), ``EngineGroup`` puts several replicas (in-process or Ray actors,
``engine/ray_replica.py``) behind one engine; every engine implements
``Engine`` so the gateway and trainer do not care which one runs. Importing this package does
not import torch (engines import it when built).
"""

from rltune._lazy import lazy_getattr
from rltune.engine.base import Engine
from rltune.engine.types import (
    Completion,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    TokenDelta,
    TopLogprob,
)

__all__ = [
    "Completion",
    "Engine",
    "EngineGroup",
    "GenerationRequest",
    "GenerationResult",
    "SamplingParams",
    "TokenDelta",
    "TopLogprob",
    "TransformersEngine",
    "VLLMEngine",
]
# The engine module pulls torch only when asked for.
__getattr__ = lazy_getattr(__name__, {"TransformersEngine": "rltune.engine.transformers_engine",
                                      "VLLMEngine": "rltune.engine.vllm_engine",
                                      "EngineGroup": "rltune.engine.group"})
