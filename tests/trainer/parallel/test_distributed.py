"""FSDP2 data-parallel updates (rltune.trainer.parallel.distributed): one training step on 2
CPU ranks (gloo, launched with torchrun) equals the one-process update within fp32 tolerance."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

FIXTURE = Path(__file__).parents[1] / "fixtures" / "dp_update.py"


def _torchrun(nproc: int, out: Path, *args: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={nproc}", str(FIXTURE), str(out), *args],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return torch.load(out, weights_only=False)


def _plain(out: Path, monkeypatch) -> dict:
    # In this process (torch is loaded already): the same script, no RANK, no process group.
    import importlib.util

    monkeypatch.delenv("RANK", raising=False)
    spec = importlib.util.spec_from_file_location("dp_update", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    try:
        module.run(str(out))
    finally:
        torch.set_num_threads(threads)
    return torch.load(out, weights_only=False)


def test_two_rank_fsdp_step_equals_the_one_process_step(tmp_path, monkeypatch):
    one = _plain(tmp_path / "one.pt", monkeypatch)
    two = _torchrun(2, tmp_path / "two.pt")
    start = __import__("rltune.trainer.testing", fromlist=["tiny_qwen2"]).tiny_qwen2(0)
    assert set(two["state"]) == set(one["state"])
    moved = 0.0
    for name, w in one["state"].items():
        # Adam divides by |g|, so fp32 rounding of the summed gradient moves a weight by up
        # to ~1e-6 here (lr 1e-2); a wrong reduction (mean instead of sum, a missing share)
        # moves it by ~1e-3.
        torch.testing.assert_close(two["state"][name], w, rtol=1e-5, atol=2e-5)
        moved = max(moved, float((w - start.state_dict()[name]).abs().max()))
    assert moved > 1e-3  # the step really changed the weights (lr 1e-2, two optimizer steps)
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/pg_clipfrac"):
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], rel=1e-5, abs=1e-7), key
    assert two["metrics"]["actor/num_mini_batches"] == 2.0


@pytest.mark.slow
def test_resume_from_a_two_rank_checkpoint_continues_exactly(tmp_path):
    ckpt = tmp_path / "step1.pt"
    straight = _torchrun(2, tmp_path / "a.pt", "--steps", "2", "--save-after", "1", str(ckpt))
    assert torch.load(ckpt, weights_only=False)["step"] == 1
    resumed = _torchrun(2, tmp_path / "b.pt", "--steps", "2", "--resume", str(ckpt))
    assert (straight["updates"], resumed["updates"]) == (2, 1)  # B ran only step 2
    for name, w in straight["state"].items():
        assert torch.equal(resumed["state"][name], w), name
    assert resumed["metrics"] == {k: v for k, v in straight["metrics"].items()
                                  if k != "timing/s/update"} | {
        "timing/s/update": resumed["metrics"]["timing/s/update"]}


def test_lora_is_refused_by_name_and_the_kl_term_needs_its_reference():
    from rltune.config import HyperParameters, resolve_algorithm
    from rltune.sdk.errors import ConfigError
    from rltune.trainer.parallel.distributed import DataParallel, DataParallelUpdater
    from rltune.trainer.testing import tiny_qwen2

    dp = DataParallel(0, 1, torch.device("cpu"), None)
    hp = HyperParameters(algorithm="grpo", kl_loss_coef=0.01, use_kl_loss=True)
    with pytest.raises(ValueError, match="reference_model"):  # a copy of shards is no reference
        DataParallelUpdater(tiny_qwen2(0), hp, resolve_algorithm(hp), total_steps=1, dp=dp)
    hp = HyperParameters(algorithm="grpo", kl_loss_coef=0.0, lora_rank=4)
    with pytest.raises(ConfigError, match="LoRA"):
        DataParallelUpdater(tiny_qwen2(0), hp, resolve_algorithm(hp), total_steps=1, dp=dp)
