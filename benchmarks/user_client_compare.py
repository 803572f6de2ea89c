"""The user's own agent against the built-in one (issue 38): same job, two rollout functions.

Both sides train the nano calculator agent on ``agentic_compare.py``'s job (GSPO, 8 prompts x 8
rollouts, lr 2e-4, seed 3; its ``calculator`` the local HTTP service of ``_tool_service.py``,
median 0.3 s, 1 % failures), with no validation (speed only):

* ``builtin``: ``agentic_ws/functions/http_tool.py:HttpToolRollout``, one ``httpx`` pool per
  worker handed to ``AsyncOpenAI(http_client=...)``, as the project's templates write it;
* ``user``: ``agentic_ws/functions/user_client.py:UserClientRollout``, the same agent with an
  ``AsyncOpenAI(base_url, api_key)`` made per rollout, as users write it.

Each run is its own process; the sides alternate (the order flips each repeat). Reported per
side (mean and min-max over repeats, steps 2..N): seconds per step (``timing/s/step``), the
median wall clock between two steps' ``metrics.jsonl`` lines, seconds of rollout per step, the
seconds outside the step's own bracket (``timing/s/outside_step``), and the ratio user /
builtin.

    python benchmarks/user_client_compare.py --steps 6 --repeats 3 [--mode sync|stale1|stale2p]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from agentic_compare import SIDES, ToolService, agentic_job  # noqa: E402
from async_compare import cpu_model  # noqa: E402

ROLLOUTS = {"builtin": "functions/http_tool.py:HttpToolRollout",
            "user": "functions/user_client.py:UserClientRollout"}


async def one_run(spec: dict[str, Any]) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    root = Path(tempfile.mkdtemp(prefix=f"user-client-{spec['side']}-"))
    ws = agentic_job(root, spec, SIDES[spec["mode"]])
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["functions"][0]["fcmodel"]["classpath"] = ROLLOUTS[spec["side"]]
    job["datasets"] = [d for d in job["datasets"] if d["type"] == "training"]  # speed only
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = root / "job"
    await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir, base_dir=ws).run()
    rows = [r for r in read_metrics(job_dir) if r["step"] > 0]
    shutil.rmtree(root, ignore_errors=True)
    times = [r["time"] for r in rows]
    return {"side": spec["side"], "mode": spec["mode"],
            "step_s": [r["metrics"]["timing/s/step"] for r in rows],
            "rollout_s": [r["metrics"]["timing/s/rollout"] for r in rows],
            "outside_s": [r["metrics"].get("timing/s/outside_step", 0.0) for r in rows],
            "wall_between_steps_s": [b - a for a, b in itertools.pairwise(times)]}


def run_side(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    spec_file, out_file = work / "spec.json", work / "out.json"
    spec_file.write_text(json.dumps(spec))
    out_file.unlink(missing_ok=True)
    subprocess.run([sys.executable, str(Path(__file__)), "--run", str(spec_file),
                    str(out_file)], check=True)
    return json.loads(out_file.read_text())


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(values: list[float]) -> dict[str, float]:
        return {"mean": round(statistics.mean(values), 3), "min": round(min(values), 3),
                "max": round(max(values), 3)}

    out: dict[str, Any] = {}
    for side in ROLLOUTS:
        mine = [r for r in runs if r["side"] == side]
        if not mine:
            continue
        # steps 2..N: the first step also fills the pipeline and warms the workers
        out[side] = {"repeats": len(mine),
                     "s_per_step": spread([statistics.mean(r["step_s"][1:]) for r in mine]),
                     "rollout_s": spread([statistics.mean(r["rollout_s"][1:]) for r in mine]),
                     "outside_step_s": spread([statistics.mean(r["outside_s"][1:]) for r in mine]),
                     "median_wall_between_steps_s": spread(
                         [statistics.median(r["wall_between_steps_s"][1:]) for r in mine])}
    if "builtin" in out and "user" in out:
        out["user_vs_builtin"] = round(out["user"]["s_per_step"]["mean"]
                                       / out["builtin"]["s_per_step"]["mean"], 3)
    return out


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run"]:  # a child: python user_client_compare.py --run SPEC OUT
        res = asyncio.run(one_run(json.loads(Path(argv[1]).read_text())))
        Path(argv[2]).write_text(json.dumps(res))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mode", choices=sorted(SIDES), default="sync")
    ap.add_argument("--median", type=float, default=0.3)
    ap.add_argument("--fail", type=float, default=0.01)
    ap.add_argument("--model", default=os.environ.get("RLTUNE_TEST_NANO"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    model = args.model
    if not model:
        from rltune.models import ensure_demo_model

        model = str(ensure_demo_model("nano", seed=0))
    runs: list[dict[str, Any]] = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="user-client-compare-") as tmp:
        service = ToolService(args.median, args.fail)
        try:
            for rep in range(args.repeats):
                order = list(ROLLOUTS) if rep % 2 == 0 else list(ROLLOUTS)[::-1]
                for side in order:
                    spec = {"task": "calc", "model": model, "steps": args.steps,
                            "eval_steps": args.steps + 1, "tool_url": service.url,
                            "batch_size": 8, "n_rollouts": 8, "learning_rate": 2e-4, "seed": 3,
                            "max_new_tokens": 56, "max_length": 576, "train_file": None,
                            "side": side, "mode": args.mode}
                    res = run_side(spec, Path(tmp))
                    res["repeat"] = rep
                    runs.append(res)
                    print(json.dumps(res), file=sys.stderr, flush=True)
        finally:
            service.stop()
    summary = {"cpu": cpu_model(), "cores": os.cpu_count(), "mode": args.mode,
               "steps": args.steps, "minutes": round((time.time() - t0) / 60, 1),
               "load_avg": os.getloadavg(), **summarise(runs), "runs": runs}
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
