"""``rltune.trl`` half of ``trl_compare.py --rltune-side trl``: the same training written as a
TRL script (``GRPOTrainer(model=..., reward_funcs=[...], args=GRPOConfig(...))``) with the
import changed to ``rltune.trl``. Run in its own process (``python _rltune_trl_side.py
SPEC.json OUT.json``); it reports what ``_rltune_side.py`` does, so the two rltune paths and
TRL compare like for like.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rltune_side import _record_reward_spans, reward_wall_per_step


def exact(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    """The calc template's rule (``is_correct``) with TRL's reward signature."""
    from rltune.models.tasks import is_correct

    return [float(is_correct(c[-1]["content"], s))
            for c, s in zip(completions, solution, strict=True)]


def run(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ["RLTUNE_TORCH_THREADS"] = str(spec["threads"])
    from transformers import TrainerCallback

    from rltune.trainer.sink import read_metrics
    from rltune.trl import GRPOConfig, GRPOTrainer

    rows = [json.loads(line) for line in Path(spec["train_file"]).read_text().splitlines()]
    dataset = [{"prompt": r["messages"], "tools": r["tools"], **r["rollout_extra"]}
               for r in rows]
    ends: list[float] = []
    spans: list[tuple[float, float]] = []
    _record_reward_spans(spans)

    class StepEnds(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory(prefix="rltune-trl-compare-") as tmp:
        n = spec["n_rollouts"]
        args = GRPOConfig(
            output_dir=tmp, per_device_train_batch_size=spec["batch_size"] * n,
            num_generations=n, learning_rate=spec["learning_rate"],
            lr_scheduler_type="constant", warmup_steps=0,
            weight_decay=spec["weight_decay"], max_grad_norm=1.0, temperature=1.0, top_p=1.0,
            max_prompt_length=spec["max_prompt_length"],
            max_completion_length=spec["max_new_tokens"], num_train_epochs=1, beta=0.0,
            loss_type="grpo", save_strategy="no", seed=spec["seed"])
        trainer = GRPOTrainer(model=spec["model_dir"], reward_funcs=[exact], args=args,
                              train_dataset=dataset, callbacks=[StepEnds()])
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        import torch

        metrics = [r["metrics"] for r in read_metrics(tmp) if r["step"] >= 1]
        stats = dict(getattr(trainer._runtime.engine, "stats", {}))
    if len(metrics) != spec["steps"]:
        raise SystemExit(f"rltune.trl ran {len(metrics)} steps, spec says {spec['steps']}")
    return {
        "side": "rltune", "threads": torch.get_num_threads(), "train_s": train_s, "begin": t0,
        "step_ends": ends, "rewards": [m["critic/rewards/mean"] for m in metrics],
        "reward_s": reward_wall_per_step(spans, ends),
        "completion_length": [m.get("trajectory/response_length/mean", float("nan"))
                              for m in metrics],
        "logs": metrics, "engine_stats": stats,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(spec)))


if __name__ == "__main__":
    main()
