"""Per-token log-probs (and entropy) of padded rows under a Hugging Face causal LM.

When a batch has more than ``chunk_tokens`` positions, the output head runs in chunks: the
decoder's hidden states go through the head a chunk at a time and only that chunk's fp32
logits exist, never the whole ``B x T x V`` tensor (a 150k vocabulary at 16k tokens would be
~10 GB). With gradients on, each chunk is checkpointed, so the backward pass recomputes its
logits instead of keeping them. The result equals the full computation (``chunk_tokens=None``)
to float rounding. ``chunk_positions`` turns a memory budget into ``chunk_tokens``; a small
vocabulary fits in one chunk and runs the plain path (no recomputation).

Example:
    >>> import torch
    >>> ids, attn = pad_rows([[5, 6, 7], [8, 9]], pad_id=0)
    >>> ids.tolist(), attn.tolist()
    ([[5, 6, 7], [8, 9, 0]], [[1, 1, 1], [1, 1, 0]])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch.utils.checkpoint import checkpoint

log = logging.getLogger(__name__)
_BF16_BROKEN = False  # set once bf16 autocast failed on this machine; then fp32 is used
#: config keys of models whose head is more than one linear layer (soft-capping, scaling)
_HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def pad_rows(
    rows: Sequence[Sequence[float]], *, pad_id: float = 0, dtype: torch.dtype = torch.long
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad rows into a ``[B, T]`` tensor plus its 0/1 attention mask."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad_id, dtype=dtype)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=dtype)
        attn[i, : len(r)] = 1
    return out, attn


def head_logprobs_N(
    hidden_NH: torch.Tensor, head: Any, targets_N: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of ``targets_N`` and the fp32 log-softmax rows for ``N`` hidden states."""
    logits_NV = head(hidden_NH).float()
    if temperature != 1.0:
        logits_NV = logits_NV / temperature
    logp_NV = torch.log_softmax(logits_NV, dim=-1)
    return logp_NV.gather(-1, targets_N.unsqueeze(-1)).squeeze(-1), logp_NV


def _picked_entropy_N(hidden_NH: torch.Tensor, head: Any, targets_N: torch.Tensor,
                      temperature: float, with_entropy: bool
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    picked_N, logp_NV = head_logprobs_N(hidden_NH, head, targets_N, temperature)
    return picked_N, _entropy(logp_NV) if with_entropy else picked_N.detach()


def chunk_positions(model: Any, mib: int) -> int:
    """Positions whose fp32 logits fit in ``mib`` MiB for ``model``'s vocabulary."""
    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    vocab = int(getattr(getattr(causal, "config", None), "vocab_size", 0) or 0)
    if not vocab and hasattr(causal, "get_output_embeddings"):
        vocab = causal.get_output_embeddings().weight.shape[0]
    return max(1, (mib * 2**20) // (4 * max(vocab, 1)))


def _split_head(model: Any) -> Optional[tuple[Any, Any]]:
    """(decoder, output head) of a plain causal LM, or None where the head does more."""
    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(causal, "config", None)
    if config is None or any(getattr(config, k, None) for k in _HEAD_EXTRAS):
        return None
    decoder = getattr(causal, getattr(causal, "base_model_prefix", ""), None)
    head = causal.get_output_embeddings() if hasattr(causal, "get_output_embeddings") else None
    if decoder is None or head is None or decoder is causal:
        return None
    return decoder, head


def token_logprobs_BT(
    model: Any,
    input_ids_BT: torch.Tensor,
    attention_mask_BT: torch.Tensor,
    *,
    temperature: float = 1.0,
    bf16: bool = False,
    with_entropy: bool = False,
    chunk_tokens: Optional[int] = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``logp_BT[b, t] = log p(x_t | x_<t)`` (position 0 is 0), and optionally the entropy.

    Logits are divided by the sampling ``temperature`` so the log-probs are those of the
    distribution the engine sampled from. ``bf16`` runs the forward pass under bf16 autocast
    with the softmax in fp32; if autocast fails, fp32 is used from then on. ``chunk_tokens``
    bounds the positions whose logits exist at once (None: the whole batch in one go).
    """
    global _BF16_BROKEN
    device = next(model.parameters()).device
    ids = input_ids_BT.to(device)
    attn = attention_mask_BT.to(device)
    use_bf16 = bf16 and not _BF16_BROKEN
    try:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16):
            return _logprobs(model, ids, attn, temperature, with_entropy, chunk_tokens)
    except (RuntimeError, TypeError) as exc:
        if not use_bf16:
            raise
        _BF16_BROKEN = True
        log.warning("bf16 autocast failed (%s); falling back to fp32", exc)
        return _logprobs(model, ids, attn, temperature, with_entropy, chunk_tokens)


def _logprobs(model: Any, ids: torch.Tensor, attn: torch.Tensor, temperature: float,
              with_entropy: bool, chunk_tokens: Optional[int]
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
    batch, width = ids.shape
    chunked = chunk_tokens is not None and batch * (width - 1) > chunk_tokens
    parts = _split_head(model) if chunked else None
    targets_N = ids[:, 1:].reshape(-1)
    if parts is None:
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
        picked_N, logp_NV = head_logprobs_N(logits.reshape(-1, logits.shape[-1]),
                                            lambda x: x, targets_N, temperature)
        entropy_N = _entropy(logp_NV) if with_entropy else None
    else:
        decoder, head = parts
        hidden = decoder(input_ids=ids, attention_mask=attn).last_hidden_state[:, :-1]
        hidden_NH = hidden.reshape(-1, hidden.shape[-1])
        picked, entropies = [], []
        grad = torch.is_grad_enabled() and hidden_NH.requires_grad
        step = chunk_tokens or hidden_NH.shape[0] or 1
        for s in range(0, hidden_NH.shape[0], step):
            h, t = hidden_NH[s : s + step], targets_N[s : s + step]
            if grad:  # keep only the hidden chunk; the backward pass recomputes its logits
                p, e = checkpoint(_picked_entropy_N, h, head, t, temperature, with_entropy,
                                  use_reentrant=False)
            else:
                p, e = _picked_entropy_N(h, head, t, temperature, with_entropy)
            picked.append(p)
            entropies.append(e)
        picked_N = torch.cat(picked)
        entropy_N = torch.cat(entropies) if with_entropy else None
    picked = picked_N.view(batch, width - 1)
    logp_BT = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)
    entropy_BT = None
    if entropy_N is not None:
        ent = entropy_N.view(batch, width - 1)
        entropy_BT = torch.cat([torch.zeros_like(ent[:, :1]), ent], dim=1)
    return logp_BT, entropy_BT


def _entropy(logp_NV: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return -(logp_NV.exp() * logp_NV).sum(-1)

