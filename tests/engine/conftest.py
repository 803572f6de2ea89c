"""A throwaway untrained Qwen2 (random weights) with rltune's tokenizer, built once per session."""

from __future__ import annotations

import pytest


def build_random_model_dir(path, *, hidden: int = 64, layers: int = 2, seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rltune.models.tokenizer import train_tokenizer

    tok = train_tokenizer(seed=0, n_transcripts=600)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )
    model = Qwen2ForCausalLM(cfg)
    # Random init is near-uniform; sharpen it so sampling is not pure noise in the tests.
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(8.0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory):
    return build_random_model_dir(tmp_path_factory.mktemp("random_model"))
