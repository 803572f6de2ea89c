"""Vectorised next-token sampling for a batch whose rows each have their own parameters.

One call handles greedy and sampled rows, per-row temperature, top-k and top-p, banned tokens
(end-of-sequence before ``min_tokens``) and per-row seeded generators. Sampling uses the
exponential-race form of the categorical draw, ``argmax(p / E)`` with ``E ~ Exp(1)``, so a
seeded row only needs its own noise vector while the other rows share one batched draw.

The returned log-probs are those of the distribution a row samples from before any filtering:
``log_softmax(logits / temperature)`` (greedy rows: temperature 1), the number a fresh forward
pass of the same weights at the same temperature reproduces (the trainer's, which divides by
the job's ``temperature`` too). Top-k/top-p filtering is left out of them.

Example:
    >>> import torch
    >>> from rltune.engine.sampling import RowParams, sample_batch
    >>> logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    >>> greedy = [RowParams(temperature=0.0), RowParams(temperature=0.0)]
    >>> toks, lps, _ = sample_batch(logits, greedy)
    >>> toks.tolist()
    [1, 0]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class RowParams:
    """Sampling knobs of one batch row (already resolved from the request)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    banned: list[int] = field(default_factory=list)
    generator: Optional[Any] = None  # torch.Generator, seeded per request choice
    top_logprobs: int = 0


def sample_batch(logits: Any, rows: list[RowParams]) -> tuple[Any, Any, Optional[Any]]:
    """Sample one token per row of ``logits`` ([B, V]).

    Returns ``(tokens [B] long, logprobs [B] float32, top)`` where ``top`` is ``(values, ids)``
    of the highest log-probs ([B, K], K = max requested ``top_logprobs``) or ``None``; both at
    each row's temperature, unfiltered.
    """
    import torch

    logits = logits.float()
    batch, vocab = logits.shape
    dev = logits.device
    temps = torch.tensor([r.temperature for r in rows], dtype=torch.float32, device=dev)
    greedy = temps <= 0.0
    if bool(((temps != 1.0) & ~greedy).any()):
        lp = torch.log_softmax(logits / torch.where(greedy, 1.0, temps)[:, None], dim=-1)
    else:
        lp = torch.log_softmax(logits, dim=-1)

    work = logits
    banned = [(i, t) for i, r in enumerate(rows) for t in r.banned]
    if banned:  # one indexed write for the whole batch
        work = logits.clone()
        at = torch.tensor(banned, dtype=torch.long, device=logits.device)
        work[at[:, 0], at[:, 1]] = float("-inf")

    tokens = torch.empty(batch, dtype=torch.long, device=dev)
    if bool(greedy.any()):
        tokens[greedy] = work[greedy].argmax(dim=-1)
    sampled = ~greedy
    if bool(sampled.any()):
        tokens[sampled] = _draw(work, rows, temps, sampled)

    logprobs = lp.gather(1, tokens[:, None]).squeeze(1)
    k = max((r.top_logprobs for r in rows), default=0)
    top = lp.topk(min(k, vocab), dim=-1) if k > 0 else None
    return tokens, logprobs, (top.values, top.indices) if top is not None else None


def _draw(work: Any, rows: list[RowParams], temps: Any, sampled: Any) -> Any:
    import torch

    idx = sampled.nonzero().squeeze(1)
    sub_rows = [rows[i] for i in idx.tolist()]
    scaled = work[idx] / temps[idx, None]
    dev = work.device
    top_k = torch.tensor([r.top_k for r in sub_rows], dtype=torch.long, device=dev)
    top_p = torch.tensor([r.top_p for r in sub_rows], dtype=torch.float32, device=dev)
    if bool((top_k > 0).any()) or bool((top_p < 1.0).any()):
        scaled = _filter_top_k_top_p(scaled, top_k, top_p)
    probs = torch.softmax(scaled, dim=-1)
    noise = torch.empty_like(probs).exponential_()
    for j, r in enumerate(sub_rows):
        if r.generator is not None:
            # Seeded generators live on the CPU so a seed means the same thing on every device.
            own = torch.empty(probs.shape[1]).exponential_(generator=r.generator)
            noise[j] = own.to(noise.device)
    return (probs / noise).argmax(dim=-1)


def _filter_top_k_top_p(scaled: Any, top_k: Any, top_p: Any) -> Any:
    """Set logits outside each row's top-k / nucleus to -inf (one sort for the whole batch)."""
    import torch

    sorted_logits, order = scaled.sort(dim=-1, descending=True)
    vocab = scaled.shape[1]
    ranks = torch.arange(vocab, device=scaled.device)[None, :]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab))
    sorted_logits = sorted_logits.masked_fill(ranks >= k[:, None], float("-inf"))
    # Nucleus over what top-k kept (renormalised): a token is dropped when the mass before it
    # already reaches top_p; the most likely token always stays.
    probs = torch.softmax(sorted_logits, dim=-1)
    drop = (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(scaled, float("-inf")).scatter(1, order, sorted_logits)
