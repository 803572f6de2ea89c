"""The one interface every inference engine implements (built-in transformers engine, vLLM).

An engine turns prompt token ids into sampled token ids with log-probs, batches concurrent
requests itself, and can be paused to swap in new weights between training steps.

Example (any engine):
    >>> async def demo(engine):                                # doctest: +SKIP
    ...     res = await engine.generate(GenerationRequest(prompt_ids=[1, 2]))
    ...     await engine.pause(); await engine.update_weights(new_state_dict)
    ...     await engine.resume()
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Optional

from rltune.engine.types import GenerationRequest, GenerationResult, TokenDelta


class Engine(abc.ABC):
    """Asynchronous, batching inference engine over token ids."""

    #: Name the gateway reports in ``/v1/models`` unless told otherwise.
    model_name: str = "model"
    #: Longest prompt + completion the model accepts.
    max_context: int = 2048
    #: The tokenizer (a ``transformers`` tokenizer) the gateway uses to render chats.
    tokenizer: Any = None
    #: Whether the engine constrains decoding to JSON (``SamplingParams.json_schema``): vLLM
    #: does (its structured outputs); the built-in engine does not and refuses such requests.
    constrains_json: bool = False

    @property
    @abc.abstractmethod
    def weight_version(self) -> int:
        """Counts ``update_weights`` calls; recorded with every capture to spot stale samples."""

    @abc.abstractmethod
    async def generate_one(self, request: GenerationRequest) -> GenerationResult:
        """Sample ``request.sampling.n`` completions of one prompt."""

    @abc.abstractmethod
    def stream(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Yield token deltas as sampled; each choice's last delta carries ``finished``."""

    async def generate(
        self, requests: GenerationRequest | Sequence[GenerationRequest]
    ) -> list[GenerationResult]:
        """Run several requests concurrently (they share batches) and return results in order."""
        if isinstance(requests, GenerationRequest):
            requests = [requests]
        return list(await asyncio.gather(*(self.generate_one(r) for r in requests)))

    @abc.abstractmethod
    async def pause(self) -> None:
        """Stop admitting work and return once nothing is running (queued requests wait)."""

    @abc.abstractmethod
    async def resume(self) -> None:
        """Admit queued and new requests again."""

    @abc.abstractmethod
    async def update_weights(self, weights: Any) -> int:
        """Load a state dict (or copy from a model) into the engine; returns the new version."""

    def token_counters(self) -> dict[str, int]:
        """Tokens counted since the engine started: ``prompt_tokens`` (every prompt submitted,
        each of its ``n`` copies) and ``prefill_tokens`` (those actually computed in prefill);
        empty where the engine does not count them."""
        return {}

    def prefix_cache_stats(self) -> Optional[dict[str, int]]:
        """The engine's prefix KV cache (hits, size, evictions), or None if it has none."""
        return None

    async def sleep(self) -> bool:
        """Free accelerator memory for a trainer update; returns whether anything was freed.

        Engines without a sleep mode (the built-in one, vLLM on CPU) do nothing.
        """
        return False

    async def wake_up(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Undo :meth:`sleep` (a no-op when the engine does not sleep)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop background work; pending requests fail with ``abort``."""
