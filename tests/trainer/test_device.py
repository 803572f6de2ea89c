"""The device code paths, exercised on the CPU: device selection, bf16 weights, gradient
checkpointing, chunked log-probs (equal to the full computation) and the memory metric."""

from __future__ import annotations

import pytest
import torch

from rltune.config import HyperParameters, resolve_algorithm
from rltune.sdk.errors import ConfigError
from rltune.trainer.device import (
    MemoryMeter,
    bf16_supported,
    check_precision,
    on_device,
    resolve_device,
    weight_dtype,
)
from rltune.trainer.logprobs import chunk_positions, pad_rows, token_logprobs_BT
from rltune.trainer.policy import checkpointing_on, prepare_policy
from rltune.trainer.testing import tiny_qwen2
from rltune.trainer.update import PolicyUpdater, TrainingRow

CPU = torch.device("cpu")


def test_auto_is_cuda_only_when_present_and_cpu_is_the_default_here():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert HyperParameters().device == "auto"
    assert resolve_device("cpu") == CPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU machine")
def test_cuda_on_a_machine_without_one_is_refused_with_the_fix():
    with pytest.raises(ConfigError) as info:
        resolve_device("cuda:0")
    err = info.value
    assert "sees no CUDA device" in err.message and err.where.endswith(".device")
    assert "device: cpu" in err.hint


def _rows():
    return [TrainingRow([1, 5, 6, 7, 8], [0, 0, 1, 1, 1], 1.0, "a"),
            TrainingRow([1, 5, 9, 3], [0, 0, 1, 1], -1.0, "b"),
            TrainingRow([1, 4, 6, 7, 9, 9], [0, 1, 1, 1, 1, 0], 0.5, "c")]


def test_chunked_logprobs_equal_the_full_computation_in_fp32():
    model = tiny_qwen2(seed=3, vocab_size=50)
    ids, attn = pad_rows([[1, 5, 6, 7, 8, 9, 10], [1, 4, 3], [1, 2, 3, 4, 5]], pad_id=0)
    full, full_ent = token_logprobs_BT(model, ids, attn, temperature=0.7, with_entropy=True,
                                       chunk_tokens=None)
    full.sum().backward()
    full_grad = [p.grad.clone() for p in model.parameters()]
    for chunk in (1, 4, 7, 1024):
        model.zero_grad()
        logp, ent = token_logprobs_BT(model, ids, attn, temperature=0.7, with_entropy=True,
                                      chunk_tokens=chunk)
        assert logp.dtype == torch.float32 and logp.shape == full.shape
        assert torch.allclose(logp, full, atol=1e-5, rtol=0), chunk
        assert torch.allclose(ent, full_ent, atol=1e-5, rtol=0), chunk
        logp.sum().backward()  # the checkpointed chunks give the same gradients
        for p, g in zip(model.parameters(), full_grad, strict=True):
            assert torch.allclose(p.grad, g, atol=1e-5, rtol=1e-4), chunk
    with torch.no_grad():
        nograd, _ = token_logprobs_BT(model, ids, attn, temperature=0.7, chunk_tokens=3)
    assert torch.allclose(nograd, full.detach(), atol=1e-5, rtol=0)


def test_the_memory_budget_sets_the_chunk_size():
    big = tiny_qwen2(vocab_size=151936, hidden=8, layers=1)  # a Qwen2.5-sized vocabulary
    assert chunk_positions(big, 256) == 256 * 2**20 // (4 * 151936) == 441
    assert chunk_positions(tiny_qwen2(vocab_size=32), 1) == 8192
    assert HyperParameters().logprob_chunk_mib == 256


def _hp(**kw):
    return HyperParameters(algorithm="grpo", learning_rate=1e-3, n_rollouts=2, **kw)


@pytest.mark.skipif(not bf16_supported(CPU), reason="this CPU cannot run bf16 matmuls")
def test_bf16_policy_has_bf16_weights_and_optimizer_state_and_learns():
    hp = _hp(bf16=True)
    check_precision(hp, CPU)
    model = prepare_policy(tiny_qwen2(), hp, CPU)
    assert weight_dtype(hp) is torch.bfloat16
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    up = PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=4)
    metrics = up.update(_rows())
    assert metrics["actor/grad_norm"] > 0 and metrics["actor/skipped_updates"] == 0
    moved = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert moved  # lr 1e-3 moves bf16 weights
    state = next(iter(up.optimizer.state.values()))
    assert state["exp_avg"].dtype is torch.bfloat16 and state["exp_avg"].device == CPU


def test_fp32_master_weights_keep_fp32_weights_under_bf16():
    hp = _hp(bf16=True, fp32_master_weights=True)
    model = prepare_policy(tiny_qwen2(), hp, CPU)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_gradient_checkpointing_is_on_and_gives_the_same_update():
    results = []
    for flag in (False, True):
        hp = _hp(gradient_checkpointing=flag, micro_batch_size=2)
        model = prepare_policy(tiny_qwen2(seed=1), hp, CPU)
        assert checkpointing_on(model) is flag
        up = PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=4)
        metrics = up.update(_rows())
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (m0, w0), (m1, w1) = results
    assert m0["actor/grad_norm"] > 0
    assert m1["actor/grad_norm"] == pytest.approx(m0["actor/grad_norm"], rel=1e-4)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(w0, w1, strict=True))


def test_on_device_puts_a_model_back_where_it_was():
    model = tiny_qwen2()
    with on_device(model, CPU) as m:
        assert next(m.parameters()).device == CPU
    assert next(model.parameters()).device == CPU


def test_memory_meter_reports_the_peak_of_this_device():
    meter = MemoryMeter(CPU)
    meter.start()
    metrics = meter.metrics()
    assert list(metrics) == ["perf/cpu_memory_peak_gb"] and 0.01 < metrics[
        "perf/cpu_memory_peak_gb"] < 1024
