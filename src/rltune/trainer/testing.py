"""Test helpers: a throwaway in-memory Qwen2 (hidden 64, 2 layers), and the hyper-parameters
of a quick job (seconds per step on the tiny model).

Example:
    >>> m = tiny_qwen2(seed=0)
    >>> sum(p.numel() for p in m.parameters()) < 200_000
    True
"""

from __future__ import annotations

from typing import Any

#: Overrides of the calc template's hyper-parameters for a plumbing job: 2 prompts x 2
#: rollouts, one update per step (the template sets ppo_mini_batch_size 32), a checkpoint
#: every step, validation every 2, and every planned step run (the template stops at a
#: validation reward of 0.9, which a 2-prompt validation of a trained model can hit by chance).
QUICK_HYPER_PARAMETERS: dict[str, Any] = {
    "batch_size": 2,
    "n_rollouts": 2,
    "ppo_mini_batch_size": None,
    "max_length": 200,
    "max_prompt_length": 180,
    "eval_steps": 2,
    "save_strategy": "steps",
    "save_steps": 1,
    "save_total_limit": 3,
    "learning_rate": 1e-3,
    "stop_at_validation_reward": None,
}


def tiny_qwen2(seed: int = 0, vocab_size: int = 32, hidden: int = 64, layers: int = 2) -> Any:
    """A randomly initialised ``Qwen2ForCausalLM`` (fp32, eval mode off, no dropout)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256, tie_word_embeddings=True, pad_token_id=0,
        bos_token_id=1, eos_token_id=2,
    )
    return Qwen2ForCausalLM(config)
