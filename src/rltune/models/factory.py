"""Qwen2-architecture model shapes, construction and saving in Hugging Face format.

Sizes (parameter counts with the ~850-token vocabulary, tied embeddings):

==========  ==========================================  ========  ===========================
name        hidden / layers / heads / kv heads / ffn    params    use
==========  ==========================================  ========  ===========================
``tiny``    64 / 2 / 4 / 2 / 128                        ~0.1 M    unit tests, untrained
``nano``    128 / 3 / 4 / 2 / 512                       ~0.8 M    tests, README demo
``small``   256 / 4 / 4 / 2 / 1024                      ~4.2 M    warm-started, a bigger nano
==========  ==========================================  ========  ===========================

Example:
    >>> model, tok = build_tiny_model()                      # doctest: +SKIP
    >>> save_model(model, tok, "/tmp/tiny")                  # doctest: +SKIP
    >>> AutoModelForCausalLM.from_pretrained("/tmp/tiny")    # doctest: +SKIP
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltune.models.chat_template import ENDOFTEXT, IM_END
from rltune.models.tokenizer import train_tokenizer
from rltune.sdk.errors import ValidationError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

#: Name of the small JSON file rltune writes next to the weights.
META_FILE = "rltune_model.json"


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    max_positions: int = 1024


SHAPES: dict[str, ModelShape] = {
    "tiny": ModelShape(64, 2, 4, 2, 128),
    "nano": ModelShape(128, 3, 4, 2, 512),
    "small": ModelShape(256, 4, 4, 2, 1024),
}


def shape_of(size: str) -> ModelShape:
    if size not in SHAPES:
        raise ValidationError(
            f"unknown model size {size!r}", where="size", hint=f"use one of {sorted(SHAPES)}"
        )
    return SHAPES[size]


def build_model(
    size: str, tokenizer: PreTrainedTokenizerFast, seed: int = 0, *, copy_gain: float = 0.0
) -> PreTrainedModel:
    """A freshly initialised ``Qwen2ForCausalLM`` of ``size`` for ``tokenizer`` (fp32).

    ``copy_gain`` > 0: start every attention head's value/output path as a pass-through of
    that gain (:func:`copy_friendly_init`), so copying from the context is learned without a
    plateau.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    shape = shape_of(size)
    eos_ids = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)]
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=None,
        eos_token_id=eos_ids[0],
        pad_token_id=tokenizer.pad_token_id,
    )
    # Seed only around construction, so callers' RNG streams stay theirs.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
        if copy_gain > 0:
            copy_friendly_init(model, copy_gain)
    model.generation_config = GenerationConfig(
        eos_token_id=eos_ids, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    model.eval()
    return model


def copy_friendly_init(model: Any, gain: float = 1.0) -> None:
    """Start each attention head as a copier: value then output projection = a projection.

    With the default small random init, an attention head's value→output map (OV) and its
    attention pattern both start near zero, and copying a token from the context needs both:
    the gradient of each is proportional to the other, so training sits on a saddle for
    hundreds of steps and leaves it in a sudden jump whose timing depends on the seed and on
    floating-point summation order (the old warm start's failure across CPU types). Here the
    value projection of every key/value head is a random orthonormal basis ``Q`` of a
    ``head_dim`` subspace and the output projection of each query head using it is ``Q^T``
    scaled by ``gain`` / heads-per-group: whatever a head attends to is passed on, projected,
    from the start, and only *where* to attend must be learned (measured on nano: the copy is
    sharp by ~150 steps instead of 300-700, for gains 1 and 3 alike; RESULTS.md).
    """
    for layer in model.model.layers:
        _copy_friendly_attention(layer.self_attn, model.config, gain)


def _copy_friendly_attention(attn: Any, cfg: Any, gain: float) -> None:
    """One layer's value/output path as :func:`copy_friendly_init` sets it."""
    import torch

    head_dim = cfg.hidden_size // cfg.num_attention_heads
    per_group = cfg.num_attention_heads // cfg.num_key_value_heads
    with torch.no_grad():
        for kv in range(cfg.num_key_value_heads):
            basis, _ = torch.linalg.qr(torch.randn(cfg.hidden_size, head_dim))
            attn.v_proj.weight[kv * head_dim : (kv + 1) * head_dim] = basis.T
            for h in range(kv * per_group, (kv + 1) * per_group):
                attn.o_proj.weight[:, h * head_dim : (h + 1) * head_dim] = (
                    basis * gain / per_group
                )


def with_lookback_layer(model: Any, gain: float = 0.05, offsets: tuple[int, ...] = (1, 2),
                        seed: int = 0) -> Any:
    """A copy of ``model`` with a new first decoder layer whose heads look 1 or 2 tokens back.

    Copying a number of several digits from somewhere earlier in the context (a question's
    operand into a tool call) is an *induction* pattern: after writing ``2`` of ``25``, find
    the ``2`` there and copy what follows it. That needs each position to know its previous
    token, which a model learns only slowly when no head yet attends to it. The new layer has
    it from the start:

    * its query and key projections are constants (biases only) whose rotary phases make each
      head's score ``sum_i s^2 cos((m - n - offset) theta_i)``, peaked at ``offset`` tokens back
      (``offsets`` take turns over the query heads of each key/value group);
    * its value/output path copies, at ``gain``, what the head attends to (as
      :func:`copy_friendly_init` does), and its MLP starts at zero.

    At ``gain`` 0 the new model computes exactly what ``model`` does; the small default moves
    the old model's outputs a little and lets training use the new lookback at once (measured
    on nano-multistep: the operand's second digit right 0.87 after 100 steps, 0.05 without;
    RESULTS.md). The layers of ``model`` keep their weights, one index further down.
    """
    import torch
    from transformers import Qwen2ForCausalLM

    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers += 1
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[0], *cfg.layer_types]
    state = {_shift_layer(k): v for k, v in model.state_dict().items()}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        new = Qwen2ForCausalLM(cfg)
        missing, unexpected = new.load_state_dict(state, strict=False)
        if unexpected or any(not k.startswith("model.layers.0.") for k in missing):
            raise RuntimeError(f"lookback layer: weights not carried over: {missing + unexpected}")
        _init_lookback(new, gain, offsets)
    new.generation_config = copy.deepcopy(model.generation_config)
    new.to(next(model.parameters()).dtype)
    new.train(model.training)
    return new


def _shift_layer(key: str) -> str:
    parts = key.split(".")
    if key.startswith("model.layers."):
        parts[2] = str(int(parts[2]) + 1)
    return ".".join(parts)


#: Scale of the lookback heads' constant queries and keys, and how many of the fastest rotary
#: frequencies carry them: the score peaks ~4 logits above its neighbours (0.98 of the weight).
_LOOKBACK_SCALE, _LOOKBACK_FREQS = 6.0, 6


def _init_lookback(model: Any, gain: float, offsets: tuple[int, ...]) -> None:
    import torch

    cfg = model.config
    d = cfg.hidden_size // cfg.num_attention_heads
    per_group = cfg.num_attention_heads // cfg.num_key_value_heads
    theta = cfg.rope_parameters["rope_theta"] ** (-torch.arange(0, d, 2).float() / d)
    n, s = _LOOKBACK_FREQS, _LOOKBACK_SCALE
    layer = model.model.layers[0]
    attn = layer.self_attn
    _copy_friendly_attention(attn, cfg, gain)
    with torch.no_grad():
        layer.mlp.down_proj.weight.zero_()
        for kv in range(cfg.num_key_value_heads):
            attn.k_proj.weight[kv * d : (kv + 1) * d] = 0
            attn.k_proj.bias[kv * d : (kv + 1) * d] = 0
            attn.k_proj.bias[kv * d : kv * d + n] = s  # rotary pairs (i, i + d/2): k = s + 0j
            for j, h in enumerate(range(kv * per_group, (kv + 1) * per_group)):
                back = offsets[j % len(offsets)]
                q = torch.zeros(d)  # q = s * exp(-1j * back * theta): phase cancels at m - n = back
                q[:n] = s * torch.cos(back * theta[:n])
                q[d // 2 : d // 2 + n] = -s * torch.sin(back * theta[:n])
                attn.q_proj.weight[h * d : (h + 1) * d] = 0
                attn.q_proj.bias[h * d : (h + 1) * d] = q


def build_tiny_model(
    seed: int = 0,
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """An untrained ~0.1M-parameter model and its tokenizer, in memory, in about a second.

    For unit tests of components that need *a* model (engine, gateway, trainer plumbing).
    """
    tokenizer = train_tokenizer(seed=0)
    return build_model("tiny", tokenizer, seed=seed), tokenizer


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def save_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    path: str | Path,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Save weights (safetensors), config, generation config, tokenizer and ``rltune_model.json``.

    The directory then loads offline with ``AutoModelForCausalLM.from_pretrained(path)`` and
    :func:`rltune.models.load_tokenizer`.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    info = {"architecture": "Qwen2ForCausalLM", "parameters": count_parameters(model)}
    info.update(meta or {})
    (path / META_FILE).write_text(json.dumps(info, indent=2, default=_jsonable) + "\n")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return str(value)


def read_meta(path: str | Path) -> dict[str, Any] | None:
    """The ``rltune_model.json`` of a model directory, or None if it has none."""
    meta = Path(path) / META_FILE
    return json.loads(meta.read_text()) if meta.is_file() else None
