"""LoRA (``lora_rank > 0``): only adapters train, the engine and checkpoints get merged
weights, the KL reference is the policy with adapters disabled, resume is exact, and a bad
LoRA setting is a clear error."""

from __future__ import annotations

import pytest
import torch

from rltune.config import HyperParameters, resolve_algorithm, validate_hyper_parameters
from rltune.sdk.errors import ConfigError, ValidationError
from rltune.trainer.checkpoint import restore_training_state, save_checkpoint
from rltune.trainer.lora import (
    adapters_disabled,
    engine_weights,
    load_adapter,
    merged_state_dict,
    wrap_with_lora,
)
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import PolicyUpdater, TrainingRow

torch.set_num_threads(1)

MASK = [0, 0, 1, 1, 1]
LORA = {"lora_rank": 4, "lora_alpha": 16}  # scale 4: adapters move the model visibly


def _rows(second_prompt: int = 5) -> list[TrainingRow]:
    return [TrainingRow([1, 5, 6, 7, 8], MASK, 1.0, "a"),
            TrainingRow([1, 5, 9, 10, 11], MASK, -1.0, "b"),
            TrainingRow([1, second_prompt, 6, 7, 8], MASK, 1.0, "c"),
            TrainingRow([1, second_prompt, 9, 10, 11], MASK, -1.0, "d")]


def _hp(**kw) -> HyperParameters:
    return HyperParameters(**{"algorithm": "grpo", "learning_rate": 1e-2, "n_rollouts": 2,
                              "batch_size": 2, "kl_loss_coef": 0.5, **LORA, **kw})


def _lora_updater(seed: int = 3, total_steps: int = 10, **kw) -> PolicyUpdater:
    hp = _hp(**kw)
    policy = wrap_with_lora(tiny_qwen2(seed=seed), hp)
    return PolicyUpdater(policy, hp, resolve_algorithm(hp), total_steps=total_steps)


LENGTH_REWARD = """
from rltune.sdk import AbstractRewardProcessor, Reward, RewardInput, RewardOutput


class LengthReward(AbstractRewardProcessor):
    def process(self, input_data: RewardInput) -> RewardOutput:
        text = str((input_data.agent_output.messages or [{}])[-1].get("content") or "")
        return RewardOutput(reward=Reward(reward_score=len(text) / 100))
"""


def _is_adapter(name: str) -> bool:
    return ".lora_A." in name or ".lora_B." in name


def test_only_adapters_train_and_the_base_stays():
    up = _lora_updater(weight_decay=0.0)  # no decay: every change below is a gradient's
    params = dict(up.model.named_parameters())
    trainable = [n for n, p in params.items() if p.requires_grad]
    assert trainable and all(_is_adapter(n) for n in trainable)
    assert all(_is_adapter(n) == p.requires_grad for n, p in params.items())
    in_optimizer = {id(p) for g in up.optimizer.param_groups for p in g["params"]}
    assert in_optimizer == {id(params[n]) for n in trainable}
    assert up.reference is None  # no frozen copy: the reference is adapters-off

    before = {n: p.detach().clone() for n, p in params.items()}
    up.update(_rows())
    changed = {n for n, p in params.items() if not torch.equal(p, before[n])}
    # B starts at 0, so the first step moves only B (A's gradient is B^T·…= 0).
    assert changed == {n for n in trainable if ".lora_B." in n}
    up.update(_rows(second_prompt=4))
    changed = {n for n, p in params.items() if not torch.equal(p, before[n])}
    assert changed == set(trainable)


def test_reference_logprobs_are_the_base_models():
    up = _lora_updater()
    base = tiny_qwen2(seed=3)
    rows = _rows()
    assert up.reference_logprobs(rows) == up.compute_logprobs(rows, base)  # before training
    up.update(rows)
    ref = up.reference_logprobs(rows)
    assert ref == up.compute_logprobs(rows, base)  # exactly: the base weights never moved
    assert ref != up.compute_logprobs(rows)  # the policy itself did move
    with adapters_disabled(up.model):
        assert up.compute_logprobs(rows) == ref
    assert up.compute_logprobs(rows) != ref  # adapters are back on after the block


async def test_merged_weights_are_base_plus_delta_and_reach_the_engine(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.models import load_tokenizer

    hp = _hp()
    original = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    policy = wrap_with_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir), hp)
    up = PolicyUpdater(policy, hp, resolve_algorithm(hp), total_steps=4,
                       pad_token_id=load_tokenizer(tiny_model_dir).pad_token_id or 0)
    up.update(_rows())
    merged = merged_state_dict(policy)
    assert set(merged) == set(original)

    layer = policy.get_base_model().model.layers[0].self_attn.q_proj
    a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
    expected = original["model.layers.0.self_attn.q_proj.weight"] + (16 / 4) * (b @ a)
    assert torch.allclose(merged["model.layers.0.self_attn.q_proj.weight"], expected, atol=1e-6)
    moved = {k for k in merged if not torch.equal(merged[k], original[k])}
    assert "model.layers.0.mlp.down_proj.weight" in moved
    assert all(k.endswith("_proj.weight") for k in moved)  # adapted linear weights only

    # The merged weights are the policy: a plain model holding them gives its log-probs.
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    plain.load_state_dict(merged)
    for x, y in zip(up.compute_logprobs(_rows(), plain), up.compute_logprobs(_rows()),
                    strict=True):
        assert x == pytest.approx(y, abs=1e-5)

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=1)
    try:
        await engine.update_weights(engine_weights(policy))  # what sync_weights sends
        held = engine.model.state_dict()
        assert set(held) == set(merged)
        assert all(torch.equal(held[k], merged[k]) for k in merged)
    finally:
        await engine.close()


def test_resume_from_a_lora_checkpoint_reproduces_the_next_step(tmp_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    kw = {"lr_scheduler_type": "cosine", "lr_warmup_steps": 1, "total_steps": 4}
    up = _lora_updater(**kw)
    up.update(_rows())
    ckpt = save_checkpoint(tmp_path / "ckpts", step=1, model=up.model, updater=up,
                           trainer_state={"epoch": 0})
    assert (ckpt / "adapter" / "adapter_model.safetensors").is_file()
    # The checkpoint itself is a plain HF model holding the merged weights.
    plain = AutoModelForCausalLM.from_pretrained(ckpt).state_dict()
    merged = merged_state_dict(up.model)
    assert all(torch.equal(plain[k], merged[k]) for k in merged)

    step2 = up.update(_rows(second_prompt=4))
    after = {n: p.detach().clone() for n, p in up.model.named_parameters()}

    # Resume as the runtime does: the job's original base, wrapped, plus the saved adapter.
    up2 = _lora_updater(**kw)
    load_adapter(up2.model, ckpt)
    state = restore_training_state(ckpt, up2)
    assert state["step"] == 1 and up2.step == 1
    again = up2.update(_rows(second_prompt=4))
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/lr"):
        assert again[key] == pytest.approx(step2[key], rel=1e-6, abs=1e-7), key
    for n, p in up2.model.named_parameters():
        assert torch.allclose(p, after[n], atol=1e-6), n


def test_bad_lora_settings_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError) as info:
        validate_hyper_parameters({"lora_alpha": 32})
    assert "lora_alpha = 32" in info.value.message and "lora_rank is 0" in info.value.message
    assert "set lora_rank" in info.value.hint
    with pytest.raises(ConfigError, match="not a module name"):
        validate_hyper_parameters({"lora_rank": 8, "lora_target_modules": "q proj"})
    with pytest.raises(ConfigError, match=r"in \[0, 1\)"):
        validate_hyper_parameters({"lora_rank": 8, "lora_dropout": 1})
    hp = validate_hyper_parameters({"lora_rank": 8, "lora_target_modules": "q_proj, v_proj"})
    assert hp.lora_target_modules == ["q_proj", "v_proj"] and hp.lora_scale_alpha == 16

    with pytest.raises(ConfigError) as info:  # a name the model does not have
        wrap_with_lora(tiny_qwen2(), _hp(lora_target_modules="qkv"))
    assert info.value.where == "training.hyper_parameters.lora_target_modules"
    assert "q_proj" in info.value.hint and "down_proj" in info.value.hint

    up = _lora_updater()
    with pytest.raises(ValueError, match="its own KL reference"):
        PolicyUpdater(up.model, up.hp, up.knobs, total_steps=2, reference_model=tiny_qwen2())
    ckpt = save_checkpoint(tmp_path, step=1, model=up.model)
    other_rank = wrap_with_lora(tiny_qwen2(seed=3), _hp(lora_rank=8))
    with pytest.raises(ValidationError, match="does not fit") as info:
        load_adapter(other_rank, ckpt)
    assert "lora_rank" in info.value.hint
    full = save_checkpoint(tmp_path / "full", step=1, model=tiny_qwen2())
    with pytest.raises(ValidationError, match="no LoRA adapter"):
        load_adapter(up.model, full)


async def test_a_lora_job_trains_syncs_checkpoints_and_resumes(tmp_path, tiny_model_dir):
    """The runtime's wiring: no reference copy, merged weights in the engine and the
    checkpoint, adapter reloaded on resume."""
    import yaml
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from rltune.config import load_job_config
    from rltune.templates import create_workspace
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    ws = create_workspace(tmp_path / "ws", train_rows=4, val_rows=2)
    # The untrained model never answers right: reward length so every group has a signal.
    (ws / "functions" / "length_reward.py").write_text(LENGTH_REWARD)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(tiny_model_dir)
    job["functions"][1]["fcmodel"]["classpath"] = "functions/length_reward.py:LengthReward"
    job["training"]["hyper_parameters"].update({
        "algorithm": "grpo", "kl_loss_coef": 0.1, "batch_size": 2, "n_rollouts": 2,
        "ppo_mini_batch_size": None, "max_length": 200, "max_prompt_length": 180,
        "learning_rate": 1e-2, "save_strategy": "steps", "save_steps": 1,
        "save_total_limit": 2, "lora_rank": 4, "lora_target_modules": "q_proj,v_proj",
    })
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    cfg = load_job_config(ws / "job.yaml")

    trainer = Trainer(cfg, job_dir=tmp_path / "job", base_dir=ws)
    summary = await trainer.run()
    updates = [r["metrics"] for r in read_metrics(tmp_path / "job") if r["step"] > 0]
    assert all("actor/pg_loss" in m for m in updates)  # every step trained
    assert updates[-1]["actor/kl_loss"] > 0  # the reference (adapters off) is the base
    assert trainer.rt.updater.reference is None and trainer.rt.updater.lora
    merged = merged_state_dict(trainer.rt.model)
    held = trainer.rt.engine.model.state_dict()
    assert all(torch.equal(held[k], merged[k]) for k in merged)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(held[q], AutoModelForCausalLM.from_pretrained(tiny_model_dir)
                           .state_dict()[q])  # the engine samples from the trained policy
    last = tmp_path / "job" / "checkpoints" / "checkpoint-2"
    assert summary["checkpoints"][-1] == str(last)
    saved = AutoModelForCausalLM.from_pretrained(last).state_dict()
    assert all(torch.equal(saved[k], merged[k]) for k in merged)
    adapter = load_file(last / "adapter" / "adapter_model.safetensors")
    assert adapter and all(".lora_" in k and ("q_proj" in k or "v_proj" in k) for k in adapter)

    resumed = Trainer(cfg, job_dir=tmp_path / "resumed", base_dir=ws)
    await resumed.run(resume_from=tmp_path / "job" / "checkpoints" / "checkpoint-1")
    assert [r["step"] for r in read_metrics(tmp_path / "resumed")] == [2]
