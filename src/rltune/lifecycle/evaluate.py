"""Run a dataset through a model's rollout and reward functions, without training.

``python -m rltune.lifecycle.evaluate <dir>`` reads ``<dir>/spec.json``::

    {"config": "<job.yaml with resolved paths>", "base_dir": "...",
     "dataset": "<jsonl path>", "n": 4, "k": 4, "threshold": 1.0,
     "models": [{"label": "base", "path": "nano"}, {"label": "calc-v1", "path": "/..."}]}

and, model after model, starts the job's runtime (engine, gateway, function workers), samples
``n`` rollouts per prompt and scores them with the job's rewards through
``rltune.rollout.groups.run_group`` (the path a training step takes), then writes
``<dir>/result.json`` (per model: ``mean@1``, ``pass@k``, per-prompt scores; and the prompts
side by side).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rltune.lifecycle.scores import model_totals, prompt_scores, side_by_side
from rltune.rollout.groups import run_group


async def evaluate_model(config: Any, rows: list[Any], *, label: str, n: int, k: int,
                         threshold: float, base_dir: Path, work_dir: Path,
                         log: Callable[..., None]) -> dict[str, Any]:
    from rltune.trainer.runtime import TrainingRuntime

    per_prompt: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    async with TrainingRuntime(config, job_dir=work_dir, base_dir=base_dir,
                               job_id=f"eval-{label}", total_steps=1, log=log) as rt:
        groups = await asyncio.gather(*(
            run_group(rt.val_runner, rt.rewarder, row, sample_id=f"eval-{label}-p{i}",
                      sample_index=i, row_index=i, n=n)
            for i, row in enumerate(rows)))
    for results in groups:
        rewards = [r.score if r.usable else None for r in results]  # the raw reward score
        per_prompt.append(prompt_scores(rewards, k, threshold))
    out = {"model": label, **model_totals(per_prompt), "per_prompt": per_prompt,
           "seconds": round(time.perf_counter() - t0, 1)}
    log(f"{label}: mean@1 {out['mean@1']:.3f}, pass@{k} {out['pass@k']:.3f} "
        f"over {len(rows)} prompts x {n}")
    return out


def _prompt_text(row: Any) -> str:
    users = [m for m in row.message_dicts() if m.get("role") == "user"]
    content = (users[-1] if users else row.message_dicts()[-1]).get("content")
    return content if isinstance(content, str) else json.dumps(content)


async def run(root: Path) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.config.data import load_dataset

    spec = json.loads((root / "spec.json").read_text())
    base = load_job_config(spec["config"])
    rows = load_dataset(spec["dataset"])
    logf = open(root / "eval.log", "a", encoding="utf-8")  # noqa: SIM115 - closed below

    def log(msg: str, level: str = "INFO") -> None:
        logf.write(f"{time.strftime('%H:%M:%S')} {level} {msg}\n")
        logf.flush()

    results = []
    try:
        for m in spec["models"]:
            data = base.to_dict()
            data["model"] = {**(data.get("model") or {}), "name": m["path"]}
            config = type(base).load_from_dict(data)
            work = root / "work" / m["label"]
            work.mkdir(parents=True, exist_ok=True)
            results.append(await evaluate_model(
                config, rows, label=m["label"], n=spec["n"], k=spec["k"],
                threshold=spec["threshold"], base_dir=Path(spec["base_dir"]), work_dir=work,
                log=log))
    finally:
        logf.close()
    return {"n": spec["n"], "k": spec["k"], "threshold": spec["threshold"],
            "prompts": len(rows), "models": results,
            "per_prompt": side_by_side(results, [_prompt_text(r) for r in rows])}


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    root = Path(args[0]).resolve()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        result = asyncio.run(run(root))
    except BaseException as exc:
        (root / "status.json").write_text(json.dumps(
            {"status": "FAILED", "error": f"{type(exc).__name__}: {exc}"}))
        traceback.print_exc()
        return 1
    tmp = root / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, root / "result.json")
    (root / "status.json").write_text(json.dumps({"status": "SUCCEEDED"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
