"""rltune half of ``trl_compare.py``: the same training with rltune's step loop.

Run by ``trl_compare.py`` in its own process (``python _rltune_side.py SPEC.json OUT.json``).
The job is the calc template with no rollout function (so the trainer's built-in single-turn
rollout makes one chat call per rollout through the policy gateway over HTTP) and the
template's exact-answer reward running in a function-pool worker process.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def make_workspace(spec: dict[str, Any], root: Path) -> Path:
    """The calc template, the spec's training rows, and a job.yaml for single-turn GRPO."""
    from rltune.templates import TEMPLATES_DIR

    ws = root / "ws"
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    (ws / "data").mkdir(exist_ok=True)
    shutil.copy(spec["train_file"], ws / "data" / "train.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = spec["model_dir"]
    # Reward only: with no rollout function the trainer uses its built-in single-turn rollout.
    job["functions"] = [f for f in job["functions"] if f["type"] == "reward"]
    job["datasets"] = [{"type": "training", "file_name": "data/train.jsonl"}]
    job["training"]["hyper_parameters"] = {
        "algorithm": "grpo",
        "kl_loss_coef": 0.0,
        "batch_size": spec["batch_size"],
        "n_rollouts": spec["n_rollouts"],
        "learning_rate": spec["learning_rate"],
        "lr_scheduler_type": "constant",
        "lr_warmup_steps": 0,
        "weight_decay": spec["weight_decay"],
        "max_grad_norm": 1.0,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_prompt_length": spec["max_prompt_length"],
        "max_length": spec["max_prompt_length"] + spec["max_new_tokens"],
        "n_epochs": 1,
        "save_strategy": "no",
        "seed": spec["seed"],
    }
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def _record_reward_spans(spans: list[tuple[float, float]]) -> None:
    """Record the wall-clock span of every ``Rewarder.score_group`` call (one per group)."""
    from rltune.rollout.rewarder import Rewarder

    original = Rewarder.score_group

    async def timed(self: Any, results: Any, ground_truth: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            await original(self, results, ground_truth, **kwargs)
        finally:
            spans.append((t0, time.perf_counter()))

    Rewarder.score_group = timed  # type: ignore[method-assign]


def reward_wall_per_step(spans: list[tuple[float, float]], ends: list[float]) -> list[float]:
    """Seconds of each step during which at least one group was being scored (the union of
    the overlapping spans): the part of ``timing/s/rollout`` the reward pool accounts for."""
    out, start = [], float("-inf")
    for end in ends:
        inside = sorted((a, b) for a, b in spans if start <= a < end)
        total, cur_a, cur_b = 0.0, None, None
        for a, b in inside:
            if cur_b is None or a > cur_b:
                total += (cur_b - cur_a) if cur_b is not None else 0.0
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        total += (cur_b - cur_a) if cur_b is not None else 0.0
        out.append(total)
        start = end
    return out


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    # The engine sets torch's (process-wide) thread count from this when it starts.
    os.environ["RLTUNE_TORCH_THREADS"] = str(spec["threads"])
    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    ends: list[float] = []
    spans: list[tuple[float, float]] = []
    _record_reward_spans(spans)
    keep = os.environ.get("RLTUNE_COMPARE_KEEP")  # a directory: keep the job there (debugging)
    with tempfile.TemporaryDirectory(prefix="rltune-compare-") as tmp:
        root = Path(keep or tmp)
        shutil.rmtree(root / "ws", ignore_errors=True)
        ws = make_workspace(spec, root)
        config = load_job_config(ws / "job.yaml")
        trainer = Trainer(config, job_dir=root / "job", base_dir=ws,
                          progress=lambda state: ends.append(time.perf_counter()))
        if trainer.total_steps != spec["steps"]:
            raise SystemExit(f"rltune would run {trainer.total_steps} steps, spec says "
                             f"{spec['steps']}: the training file must hold steps x batch rows")
        t0 = time.perf_counter()
        await trainer.run()
        train_s = time.perf_counter() - t0
        import torch

        metrics = [r["metrics"] for r in read_metrics(root / "job") if r["step"] >= 1]
    return {
        "side": "rltune",
        "threads": torch.get_num_threads(),
        "train_s": train_s,
        "begin": t0,
        "step_ends": ends,
        "rewards": [m["critic/rewards/mean"] for m in metrics],
        "reward_s": reward_wall_per_step(spans, ends),
        "completion_length": [m.get("trajectory/response_length/mean", float("nan"))
                              for m in metrics],
        "logs": metrics,
        # Engine counters over the whole run: forwards that admitted new requests (prefills)
        # and decode forwards; prefills per step show how the HTTP arrivals were batched.
        "engine_stats": dict(getattr(trainer.rt.engine, "stats", {})),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main()
