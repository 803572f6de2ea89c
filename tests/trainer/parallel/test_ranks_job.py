"""``rltune train`` with ``n_gpus_training: 2`` (real processes: the job process is rank 0, one
``rank_worker`` process is rank 1, gloo on the CPU) on the untrained tiny model.

* Each step's update equals the one-process update of the same rows (read back from the
  step's trajectories), and a job resumed from the 2-rank checkpoint continues exactly: its
  next step equals the one-process step from that checkpoint's weights and optimizer state.
* The rank dies with the job (SIGKILL, Ctrl-C), and a rank that dies fails the job with an
  error naming it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from rltune._process import pid_alive
from rltune.config import load_job_config
from rltune.templates import create_workspace
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS
from rltune.trainer.update import PolicyUpdater, TrainingRow

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _workspace(tmp_path: Path, model_dir: Path, **hp) -> Path:
    """The calculator workspace with a reward that always splits a group (response-length
    parity), so steps carry a learning signal."""
    ws = tmp_path / "ws"
    create_workspace(ws, train_rows=12, val_rows=2)
    shutil.copytree(FIXTURES / "nanws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = str(model_dir)
    job["functions"][1]["fcmodel"]["classpath"] = "functions/nan_reward.py:LengthParity"
    params = job["training"]["hyper_parameters"]
    params.pop("n_epochs", None)
    params.update({**QUICK_HYPER_PARAMETERS, "batch_size": 3, "n_rollouts": 4, "max_steps": 2,
                   "kl_loss_coef": 0.0, "lr_scheduler_type": "constant", "eval_steps": 100,
                   "val_n_rollouts": 1, "n_gpus_training": 2, **hp})
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "RLTUNE_HOME": str(home), "OMP_NUM_THREADS": "1",
            "RLTUNE_TORCH_THREADS": "1"}


def _train(ws: Path, out: Path, tmp_path: Path, *extra: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(ws / "job.yaml"),
         "-O", str(out), "-q", *extra],
        capture_output=True, text=True, timeout=900, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _rows(job_dir: Path, step: int, max_length: int) -> list[TrainingRow]:
    """The rows a step trained on, from its trajectories (the signal's own construction)."""
    rows = []
    for line in (job_dir / "trajectories" / f"step_{step:06d}.jsonl").open():
        t = json.loads(line)
        if t["status"] != "success":
            continue
        for tok in t["tokens"]:
            mask = tok["loss_mask"][:max_length]
            if sum(mask):
                rows.append(TrainingRow(tok["input_ids"][:max_length], mask, t["advantage"],
                                        t["rollout_id"]))
    return rows


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from rltune.trainer.checkpoint import checkpoint_weights

    return checkpoint_weights(folder)


def _replay(start: Path, rows: list[TrainingRow], ws: Path, *, state: Path | None = None):
    """One process: the weights in ``start`` (and the optimizer state of checkpoint
    ``state``), then the update of ``rows`` as the job makes it."""
    from transformers import AutoModelForCausalLM

    from rltune.models import load_tokenizer

    cfg = load_job_config(ws / "job.yaml")
    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    pad = load_tokenizer(Path(cfg.model.name)).pad_token_id or 0
    up = PolicyUpdater(model, cfg.hyper_parameters, cfg.knobs, total_steps=2, pad_token_id=pad)
    if state is not None:
        up.load_state_dict(torch.load(state / "training_state.pt", weights_only=False))
    if any(a for r in rows for a in r.advantage):  # else the step had no signal: no update
        up.update(rows)
    return up


def _assert_close(got: dict, want: dict) -> None:
    for name, w in want.items():
        # Adam divides by |g|: fp32 rounding of the summed gradient moves a weight by ~1e-6
        torch.testing.assert_close(got[name], w, rtol=1e-5, atol=2e-5, msg=name)


def test_two_rank_job_updates_like_one_process_and_resumes_exactly(tmp_path, tiny_model_dir):
    torch.set_num_threads(1)
    ws = _workspace(tmp_path, tiny_model_dir)
    a, b = tmp_path / "a", tmp_path / "b"
    _train(ws, a, tmp_path)
    assert "data parallel: 2 trainer ranks" in (a / "train.log").read_text()
    assert "ready on cpu" in (a / "ranks" / "rank-1.log").read_text()
    ckpt1 = a / "checkpoints" / "checkpoint-1"
    max_length = load_job_config(ws / "job.yaml").hyper_parameters.max_length

    one = _replay(tiny_model_dir, _rows(a, 1, max_length), ws)
    assert one.step == 1  # step 1 trained
    got = _weights(ckpt1)
    _assert_close(got, one.model.state_dict())
    base = _weights(tiny_model_dir)
    assert max(float((got[k] - base[k]).abs().max()) for k in base) > 1e-4

    # A second job resumes from the 2-rank checkpoint and trains step 2 on 2 ranks.
    _train(ws, b, tmp_path, "--resume", str(ckpt1))
    assert f"resumed from {ckpt1}" in (b / "train.log").read_text()
    assert not (b / "trajectories" / "step_000001.jsonl").exists()
    cont = _replay(ckpt1, _rows(b, 2, max_length), ws, state=ckpt1)
    _assert_close(_weights(b / "checkpoints" / "checkpoint-2"), cont.model.state_dict())
    saved = torch.load(b / "checkpoints" / "checkpoint-2" / "training_state.pt",
                       weights_only=False)
    want = cont.state_dict()
    assert saved["step"] == want["step"] == 2
    def plain(groups):  # gathered state keeps betas as a list, a live optimizer a tuple
        return [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()}
                for g in groups]

    assert plain(saved["optimizer"]["param_groups"]) == plain(want["optimizer"]["param_groups"])
    for i, moments in want["optimizer"]["state"].items():
        for key, value in moments.items():
            torch.testing.assert_close(saved["optimizer"]["state"][i][key], value,
                                       rtol=1e-4, atol=1e-7, msg=f"{i}.{key}")


def _start(ws: Path, out: Path, tmp_path: Path) -> tuple[subprocess.Popen, int]:
    """``rltune train`` in its own session; returns it and rank 1's pid once rank 1 is ready."""
    with open(tmp_path / "train.out", "wb") as log:
        job = subprocess.Popen(
            [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(ws / "job.yaml"),
             "-O", str(out), "-q"], stdout=log, stderr=subprocess.STDOUT, env=_env(tmp_path),
            start_new_session=True)
    rank_log = out / "ranks" / "rank-1.log"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and job.poll() is None:
        text = rank_log.read_text() if rank_log.exists() else ""
        if "ready on cpu (pid " in text:
            return job, int(text.split("ready on cpu (pid ")[1].split(")")[0])
        time.sleep(0.5)
    job.kill()
    raise AssertionError((tmp_path / "train.out").read_text()[-3000:])


def _gone(pid: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not pid_alive(pid)


@pytest.mark.parametrize("how", ["kill-job", "ctrl-c", "kill-rank"])
def test_ranks_die_with_the_job_and_a_dead_rank_fails_it(tmp_path, tiny_model_dir, how):
    ws = _workspace(tmp_path, tiny_model_dir, max_steps=3)
    out = tmp_path / "job"
    job, rank = _start(ws, out, tmp_path)
    try:
        if how == "kill-job":
            job.kill()  # SIGKILL: no cleanup runs in the job process
            assert _gone(rank)
        elif how == "ctrl-c":
            os.killpg(job.pid, signal.SIGINT)  # what a terminal sends the foreground group
            job.wait(timeout=120)
            assert _gone(rank, within=5)  # the job stopped it on its way out
        else:
            os.kill(rank, signal.SIGKILL)
            assert job.wait(timeout=300) != 0
            log = (out / "train.log").read_text()
            assert "trainer rank 1 of 2 exited with code -9" in log
            assert str(out / "ranks" / "rank-1.log") in log
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)  # the session this test started
        except ProcessLookupError:
            pass


def test_an_opd_job_runs_on_two_ranks(tmp_path, tiny_model_dir):
    """On-policy distillation has no KL term, so ``n_gpus_training: 2`` is accepted (it was
    refused "for the KL term": the check read the gspo preset) and trains on both ranks."""
    from rltune.models import build_tiny_model, save_model

    teacher = save_model(*build_tiny_model(seed=1), tmp_path / "teacher",
                         meta={"size": "tiny", "seed": 1, "trained": False})
    ws = _workspace(tmp_path, tiny_model_dir, max_steps=1, kl_loss_coef=0.001)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["teacher_model"] = str(teacher)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    assert load_job_config(ws / "job.yaml").knobs.advantage_estimator == "opd"
    out = tmp_path / "opd"
    _train(ws, out, tmp_path)
    assert "data parallel: 2 trainer ranks" in (out / "train.log").read_text()
    assert "ready on cpu" in (out / "ranks" / "rank-1.log").read_text()
    got, base = _weights(out / "checkpoints" / "checkpoint-1"), _weights(tiny_model_dir)
    assert all(bool(torch.isfinite(v).all()) for v in got.values())
    assert max(float((got[k] - base[k]).abs().max()) for k in base) > 1e-6  # it trained
