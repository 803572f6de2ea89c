"""Engine-level request and result types: token ids in, token ids and log-probs out.

The engine never sees chat messages; the gateway renders them to ids first. Keeping the engine on
ids is what makes capture token-exact: what the engine returns is exactly what was sampled.

Example:
    >>> from rltune.engine.types import GenerationRequest, SamplingParams
    >>> req = GenerationRequest(prompt_ids=[1, 2, 3], sampling=SamplingParams(max_tokens=4))
    >>> req.sampling.temperature, req.sampling.n
    (1.0, 1)
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length", "abort"]


class SamplingParams(BaseModel):
    """How to sample one completion. ``temperature=0`` means greedy.

    ``top_k=0`` and ``top_p=1`` switch those filters off. ``stop`` strings end the completion
    when they appear in the decoded text (the tokens that produced them stay in
    ``completion_ids`` because they were sampled; the gateway cuts the text). ``seed`` makes
    sampling reproducible for one request (best effort: batch composition can move logits by
    float rounding, which only matters at near-ties).
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    max_tokens: int = Field(default=256, ge=1)
    min_tokens: int = Field(default=0, ge=0)
    stop: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    ignore_eos: bool = False
    seed: Optional[int] = None
    n: int = Field(default=1, ge=1, le=128)
    top_logprobs: int = Field(default=0, ge=0, le=20)
    #: constrain the completion to JSON: ``{}`` any JSON object (``response_format``
    #: ``json_object``), else that JSON schema; only an engine whose ``constrains_json`` is
    #: true takes it (the gateway refuses it by name otherwise)
    json_schema: Optional[dict[str, Any]] = None


class GenerationRequest(BaseModel):
    """One prompt (as token ids) and how to sample from it."""

    model_config = ConfigDict(extra="forbid")

    prompt_ids: list[int] = Field(min_length=1)
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    #: what shares this prompt's prefix with other calls (a rollout, a prompt's group): an
    #: engine group sends every call of one session to one replica (``engine/affinity.py``);
    #: a single engine ignores it
    session: Optional[str] = None


class TopLogprob(BaseModel):
    token_id: int
    logprob: float


class Completion(BaseModel):
    """One sampled completion.

    ``logprobs[i]`` is log p(completion_ids[i] | prefix) under the model's distribution at the
    request's temperature (greedy: 1) without top-k/top-p filtering: the value a fresh forward
    pass of the same weights at that temperature gives, which is what the trainer compares its
    recomputed log-probs with (the vllm engine: always temperature 1, ``vllm_engine.py``).
    """

    index: int = 0
    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    stop_reason: Optional[str | int] = None
    top_logprobs: Optional[list[list[TopLogprob]]] = None
    #: the engine weight version that sampled every token (None: the engine does not say)
    weight_version: Optional[int] = None


class GenerationResult(BaseModel):
    """All ``n`` completions of one request, plus bookkeeping the capture layer records."""

    prompt_ids: list[int]
    completions: list[Completion]
    weight_version: int = 0
    latency_s: float = 0.0


class TokenDelta(BaseModel):
    """A streamed piece of one completion: new token ids (and their log-probs) since the last."""

    index: int = 0
    token_ids: list[int]
    logprobs: list[float]
    finished: Optional[Completion] = None
