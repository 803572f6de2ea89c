"""The updater on the project's tiny model (own tokenizer + chat template), with rows built
from a chat the way the gateway builds them: prompt tokens masked, answer tokens trained."""

from __future__ import annotations

import torch

from rltune.config import HyperParameters, resolve_algorithm
from rltune.trainer.checkpoint import save_checkpoint
from rltune.trainer.update import PolicyUpdater, TrainingRow


def test_update_and_checkpoint_with_tiny_model(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from rltune.models import load_tokenizer

    tok = load_tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2+3?"}],
                                     add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    rows = []
    for i, answer in enumerate(["### ANSWER: 5 ###", "### ANSWER: 6 ###"]):
        ans_ids = tok(answer, add_special_tokens=False)["input_ids"]
        rows.append(TrainingRow(prompt_ids + ans_ids, [0] * len(prompt_ids) + [1] * len(ans_ids),
                                1.0 if i == 0 else -1.0, f"r{i}"))
    hp = HyperParameters(algorithm="gspo", learning_rate=1e-3, n_rollouts=2, batch_size=1)
    up = PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=3,
                       pad_token_id=tok.pad_token_id or 0)
    before = up.compute_logprobs(rows)
    m = up.update(rows)
    after = up.compute_logprobs(rows)
    gain = [sum(a) - sum(b) for a, b in zip(after, before, strict=True)]
    assert gain[0] > 0 > gain[1]
    assert m["actor/lr"] == 1e-3 / 2  # auto warmup: ceil(0.03·3) = 1 step → factor 1/2
    ckpt = save_checkpoint(tmp_path, step=1, model=model, tokenizer=tok, updater=up)
    again = AutoModelForCausalLM.from_pretrained(ckpt)
    for p, q in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(p, q)
    assert load_tokenizer(ckpt)(answer, add_special_tokens=False)["input_ids"] == ans_ids
