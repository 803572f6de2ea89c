"""The reference the engine tests hold sampled log-probs to: one unpadded forward pass of the
whole sequence, no cache, no batching (tests/engine)."""

from __future__ import annotations

import torch


def fresh_logprobs(model, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """Log-probs of ``completion_ids`` after ``prompt_ids`` from one full forward pass."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits.float(), dim=-1)[0]
    n = len(prompt_ids)
    return [lp[n - 1 + i, t].item() for i, t in enumerate(completion_ids)]
