"""Agentic workloads at speed (issue 31): a tool agent whose tool is a slow, flaky web service.

The nano calculator agent trains on the learning test's job (GSPO, 8 prompts x 8 rollouts,
lr 2e-4), but its ``calculator`` is a real local HTTP service (``_tool_service.py``, started
and stopped here) with lognormal latency (median 0.3 s, p99 ~2 s) and 1 % failures; the rollout
(``agentic_ws/functions/http_tool.py``) reads a failed call as a tool error. Sides:

* ``sync``: rltune, ``max_staleness: 0``;
* ``stale1``: rltune, ``max_staleness: 1`` (streaming rollouts);
* ``stale2p``: rltune, ``max_staleness: 2`` and ``partial_rollouts: true``;
* ``trl``: TRL's ``GRPOTrainer`` with its own tool loop (``_trl_agentic_side.py``): the same
  model, prompts, tool schema and service, reward, batch, learning rate and steps.

Every side runs in its own process (peak RSS is that process's, plus its largest child for
rltune's function workers), one after another, the order rotating each repeat. Reported per
side (mean and min-max over repeats): seconds per step, seconds to the target validation
reward (the job's wall clock including validation; TRL has no validation in this loop, so
none), episodes per second, engine and trainer idle shares, peak RSS.

    python benchmarks/agentic_compare.py --steps 10 --repeats 3 [--sides sync,stale1,stale2p,trl]

``--task multihop`` runs the multi-hop agent instead (``agentic_ws/functions/multihop_task.py``):
3-6 forced search calls per episode (long-tailed) against a real local MCP server over a
generated fact corpus (``_mcp_corpus_server.py``, the same latency and failure knobs), TRL's
side a ``rollout_func`` (``_trl_multihop_side.py``: TRL's ``tools=`` loop cannot drive hops the
agent decides). Each trained episode's tool calls and seconds (rltune: from the stored
trajectories; TRL: counted by its rollout function) give their distribution per side (mean,
p50, p90, max).

``--task multistep`` (issue 38 item 3) trains the ``multistep`` template's job as shipped
(``_multistep_bench.py``: GSPO, 8 x 8, lr 3e-4, ``max_length`` 448 / ``max_prompt_length`` 384,
64 held-out chains x 2 validated on the exact answer) on the ``nano-multistep`` demo model
(rltune's registry; ``--model`` for another): chains of 2-4 dependent calculator calls ("Start
with 17. Add 25, then multiply by 3, then subtract 9."), the calculator the same HTTP service
(``agentic_ws/functions/multistep.py``), the reward the template's (exact answer + 0.5 x share
of calls right; validation the exact answer). TRL's side (``_trl_multistep_side.py``) is its
``tools=`` loop, which generates again while the model keeps calling tools, and validates the
same held-out rows with the same reward in a callback, inside its wall clock, so every side has
a time to the target (``--target``, the same for every side; default: the lowest best
validation of all runs). Each side also reports the tokens of an episode: its prompt, the
tokens it added (sampled + tool results and template glue), and those the engine computed in
prefill (rltune: the job's ``engine/prefill_tokens`` over every episode it ran, validation
included, ``_multistep_bench.token_use``; TRL: every training model call's context, which
``generate`` prefills whole); and the issue's three targets (``issue38_targets``: best async
time to target vs sync >= 1.5x, rltune s/step <= 0.25x TRL's, prefill / added <= 1.3x).

    python benchmarks/agentic_compare.py --task multistep --steps 20 --eval-steps 2 --repeats 3

``--scale-lr-by-staleness`` runs the async sides with ``scale_lr_by_staleness: true``;
``--report OUT.runs.jsonl [--target T]`` summarises an earlier run again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
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
sys.path.insert(0, str(HERE / "agentic_ws"))
from _multistep_bench import (  # noqa: E402
    issue_targets,
    multistep_job,
    summarise_tokens,
    token_use,
)
from async_compare import (  # noqa: E402
    PIPELINE_MODES,
    cpu_model,
    make_job,
    pipeline_knobs,
    time_to,
)

SIDES = PIPELINE_MODES  # the rltune sides (TRL's is "trl")
VAL = "validation/data/reward/mean@1"
TRL_SCRIPTS = {"calc": "_trl_agentic_side.py", "multihop": "_trl_multihop_side.py",
               "multistep": "_trl_multistep_side.py"}


class ToolService:
    """The task's tool server in its own process, for the whole benchmark: the HTTP calculator
    (``_tool_service.py``) or, with ``corpus``, the MCP fact-corpus server."""

    def __init__(self, median: float, fail: float, corpus: Optional[Path] = None):
        self.port_file = Path(tempfile.mkstemp(prefix="tool-port-")[1])
        self.port_file.write_text("")
        script, extra = ("_tool_service.py", []) if corpus is None else \
            ("_mcp_corpus_server.py", ["--corpus", str(corpus)])
        self.proc = subprocess.Popen([sys.executable, str(HERE / script), *extra,
                                      "--port-file", str(self.port_file),
                                      "--median", str(median), "--fail", str(fail)])
        deadline = time.monotonic() + 60
        while not self.port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the tool service did not start")
            time.sleep(0.1)
        self.base = f"http://127.0.0.1:{self.port_file.read_text().strip()}"
        self.url = self.base if corpus is None else self.base + "/mcp"

    def stats(self) -> dict[str, Any]:
        import httpx

        return httpx.get(self.base + "/stats", timeout=10).json()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.port_file.unlink(missing_ok=True)


MULTIHOP_VAL = 16  # validation questions (x val_n_rollouts 2): a pass costs about a step


def multihop_rows(steps: int, batch_size: int) -> tuple[list[dict], list[dict]]:
    """The multi-hop task's training rows (both sides) and validation rows (rltune's)."""
    from functions.multihop_task import make_rows

    return make_rows(steps * batch_size, seed=1), make_rows(MULTIHOP_VAL, seed=2)


def agentic_job(root: Path, spec: dict[str, Any], extra: dict) -> Path:
    """The learning test's calc job with the task's rollout (and, for multihop, its data,
    reward and lengths); for multistep the template's job (``_multistep_bench``)."""
    if spec["task"] == "multistep":
        return multistep_job(root, spec, extra)
    ws = make_job(root, spec["model"], spec["steps"], spec["eval_steps"], extra)
    shutil.copytree(HERE / "agentic_ws" / "functions", ws / "functions", dirs_exist_ok=True)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    rollout = job["functions"][0]
    if spec["task"] == "calc":
        rollout["fcmodel"]["classpath"] = "functions/http_tool.py:HttpToolRollout"
        rollout["runtime"]["env"] = {"TOOL_URL": spec["tool_url"]}
    else:
        from rltune.models.tasks import write_jsonl

        train, val = multihop_rows(spec["steps"], spec["batch_size"])
        write_jsonl(train, ws / "data" / "train.jsonl")
        write_jsonl(val, ws / "data" / "val.jsonl")
        rollout["fcmodel"]["classpath"] = "functions/multihop.py:MultihopRollout"
        rollout["runtime"]["env"] = {"MCP_URL": spec["tool_url"]}
        job["functions"][1]["fcmodel"]["classpath"] = "functions/multihop.py:MultihopReward"
        job["training"]["hyper_parameters"].update(
            max_length=spec["max_length"], max_prompt_length=200, val_n_rollouts=2)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


async def rltune_side(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    root = Path(tempfile.mkdtemp(prefix=f"agentic-{name}-"))
    ws = agentic_job(root, spec, pipeline_knobs(name, spec.get("scale_lr_by_staleness", False)))
    job_dir = root / "job"
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir,
                            base_dir=ws).run()
    curve, clock, step_s = [], 0.0, []
    idle = {"engine": 0.0, "trainer": 0.0}
    rewards, parts = [], {}
    engine_tokens = {"prompt": 0.0, "prefill": 0.0}  # since the job began, validation included
    metric_rows = read_metrics(job_dir)
    for row in metric_rows:
        m = row["metrics"]
        for kind in engine_tokens:
            engine_tokens[kind] += m.get(f"engine/{kind}_tokens", 0.0)
        if row["step"] == 0:
            curve.append((0, 0.0, m.get(VAL)))
            continue
        step_s.append(m["timing/s/step"])
        rewards.append(m.get("critic/rewards/mean"))
        for key, value in m.items():  # the multi-hop reward's parts, per step
            if key.startswith("trace/reward_metrics/") and key.endswith("/mean"):
                parts.setdefault(key.split("/")[-2], []).append(value)
        clock += m["timing/s/step"] + m.get("timing/s/validation", 0.0)
        for who in idle:
            idle[who] += m.get(f"fully_async/idle/{who}_s", 0.0)
        if VAL in m:
            curve.append((row["step"], round(clock, 2), m[VAL]))
    episodes = len(step_s) * spec["batch_size"] * spec["n_rollouts"]  # training episodes
    shapes = episode_shapes(job_dir) if spec["task"] in ("multihop", "multistep") else []
    tokens = token_use(job_dir, ws, metric_rows, spec["batch_size"] * spec["n_rollouts"])
    shutil.rmtree(root, ignore_errors=True)
    return {"side": name, "seconds_per_step": statistics.mean(step_s), "step_seconds": step_s,
            "episodes_per_s": episodes / max(sum(step_s), 1e-9), "curve": curve,
            "initial": summary["initial_validation"], "rewards": rewards,
            "reward_parts": parts,
            "idle_share": {k: v / max(sum(step_s), 1e-9) for k, v in idle.items()},
            "peak_rss_mb": _rss_mb(resource.RUSAGE_SELF),
            "peak_child_rss_mb": _rss_mb(resource.RUSAGE_CHILDREN), "episodes": shapes,
            "engine_tokens": engine_tokens, "tokens": tokens}


def episode_shapes(job_dir: Path) -> list[dict[str, float]]:
    """Tool calls, hops and seconds of each trained episode, from the stored trajectories."""
    out = []
    for path in sorted((job_dir / "trajectories").glob("step_*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            metrics = rec.get("rollout_metrics") or {}
            if rec.get("status") == "success" and "tool_calls" in metrics:
                out.append({"tool_calls": metrics["tool_calls"], "hops": metrics.get("hops"),
                            "seconds": rec.get("latency_s")})
    return out


def _rss_mb(who: int) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def run_side(name: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """One side in a fresh process; returns its JSON result."""
    spec_file, out_file = work / f"spec-{name}.json", work / f"out-{name}.json"
    spec_file.write_text(json.dumps(spec))
    out_file.unlink(missing_ok=True)
    trl_script = TRL_SCRIPTS[spec["task"]]
    script = [str(HERE / trl_script)] if name == "trl" else \
        [str(Path(__file__)), "--side", name]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *script, str(spec_file), str(out_file)], check=True)
    res = json.loads(out_file.read_text())
    res["process_s"] = time.perf_counter() - t0
    return res


def _spread(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.mean(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def _quantiles(values: list[float]) -> dict[str, float]:
    """Mean, p50, p90 and max (nearest rank).

    >>> _quantiles([3.0, 3.0, 4.0, 6.0])
    {'mean': 4.0, 'p50': 3.0, 'p90': 6.0, 'max': 6.0}
    """
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"mean": round(statistics.mean(ordered), 3), "p50": rank(0.5), "p90": rank(0.9),
            "max": ordered[-1]}


def report(results: list[dict[str, Any]], target: Optional[float]) -> dict[str, Any]:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault(r["side"], []).append(r)
    if target is None:  # the lowest best validation of any rltune run: every run reached it
        bests = [max(v for s, _, v in r["curve"] if s and v is not None)
                 for r in results if r.get("curve")]
        target = min(bests) if bests else None
    out: dict[str, Any] = {"target_validation": target, "sides": {}}
    for side, runs in by.items():
        row: dict[str, Any] = {"repeats": len(runs),
                               "seconds_per_step": _spread([r["seconds_per_step"] for r in runs]),
                               "episodes_per_s": _spread([r["episodes_per_s"] for r in runs]),
                               # steps 2..N: without the first step's pipeline fill
                               "seconds_per_step_after_first": _spread(
                                   [statistics.mean(r["step_seconds"][1:] or r["step_seconds"])
                                    for r in runs]),
                               "peak_rss_mb": _spread([r["peak_rss_mb"] for r in runs])}
        if runs[0].get("curve") is not None and target is not None:
            reach = [time_to(r["curve"], target) for r in runs]
            row["seconds_to_target"] = [None if t is None else round(t, 1) for t in reach]
            row["final_validation"] = [r["curve"][-1][2] for r in runs]
        if "idle_share" in runs[0]:
            row["idle_share"] = {k: _spread([r["idle_share"][k] for r in runs])
                                 for k in runs[0]["idle_share"]}
        shapes = [e for r in runs for e in r.get("episodes", [])]
        if shapes:
            row["episodes_logged"] = len(shapes)
            for key in ("tool_calls", "seconds"):
                row[f"{key}_per_episode"] = _quantiles([float(e[key]) for e in shapes])
        tokens = summarise_tokens(runs)
        if tokens:
            row["tokens"] = tokens
        if "peak_child_rss_mb" in runs[0]:
            row["peak_child_rss_mb"] = _spread([r["peak_child_rss_mb"] for r in runs])
        out["sides"][side] = row
    sync = out["sides"].get("sync")
    for side, row in out["sides"].items():
        if sync and side != "sync":
            row["step_vs_sync"] = round(row["seconds_per_step"]["mean"]
                                        / sync["seconds_per_step"]["mean"], 3)
            reach_s = [t for t in sync.get("seconds_to_target", []) if t]
            reach = [t for t in row.get("seconds_to_target", []) if t]
            if reach_s and reach:
                row["speedup_to_target_vs_sync"] = round(statistics.mean(reach_s)
                                                         / statistics.mean(reach), 3)
    trl = out["sides"].get("trl")
    if trl:
        for side, row in out["sides"].items():
            if side != "trl":
                row["step_vs_trl"] = round(row["seconds_per_step"]["mean"]
                                           / trl["seconds_per_step"]["mean"], 3)
    return out


def summarise(runs: list[dict[str, Any]], target: Optional[float], task: str) -> dict[str, Any]:
    """``report()`` over the runs, with issue 38's targets for the multistep task."""
    summary = report(runs, target)
    if task == "multistep":
        summary["issue38_targets"] = issue_targets(
            summary["sides"], summary["target_validation"],
            [r["initial"] for r in runs if r.get("initial") is not None])
    return summary


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--side"]:  # a child: python agentic_compare.py --side NAME SPEC OUT
        name, spec_file, out_file = argv[1], Path(argv[2]), Path(argv[3])
        res = asyncio.run(rltune_side(name, json.loads(spec_file.read_text())))
        out_file.write_text(json.dumps(res))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=tuple(TRL_SCRIPTS), default="calc")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--eval-steps", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sides", default="sync,stale1,stale2p,trl")
    ap.add_argument("--median", type=float, default=0.3)
    ap.add_argument("--fail", type=float, default=0.01)
    ap.add_argument("--target", type=float, default=None)
    ap.add_argument("--model", default=None, help="model directory or name (default: "
                    "$RLTUNE_TEST_NANO, else the nano demo model; multistep: nano-multistep)")
    ap.add_argument("--val-rows", type=int, default=None,
                    help="multistep: held-out chains per validation (default: 64, the template's)")
    ap.add_argument("--scale-lr-by-staleness", action="store_true",
                    help="the async sides run with scale_lr_by_staleness: true")
    ap.add_argument("--report", type=Path, default=None, metavar="RUNS_JSONL",
                    help="summarise an earlier run's OUT.runs.jsonl (with --target) and exit")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.report:
        if not args.report.is_file():
            ap.error(f"--report {args.report}: no such file (an earlier run's --out with "
                     "the suffix .runs.jsonl)")
        runs = [json.loads(line) for line in args.report.read_text().splitlines() if line]
        print(json.dumps(summarise(runs, args.target, args.task), indent=1))
        return 0
    if args.val_rows is not None and (args.task != "multistep" or args.val_rows < 1):
        ap.error("--val-rows takes a positive number of held-out chains, with --task multistep "
                 "only (the other tasks validate on their learning test's rows)")
    model = args.model
    if not model and args.task == "multistep":
        from _multistep_bench import default_model

        model = default_model()
    model = model or os.environ.get("RLTUNE_TEST_NANO")
    if not model:
        from rltune.models import ensure_demo_model

        model = str(ensure_demo_model("nano", seed=0))
    sides = args.sides.split(",")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agentic-compare-") as tmp:
        work = Path(tmp)
        corpus = None
        if args.task == "multihop":
            from functions.multihop_task import corpus_of

            corpus = work / "corpus.jsonl"
            train, val = multihop_rows(args.steps, 8)
            corpus.write_text("".join(json.dumps(d) + "\n" for d in corpus_of(train + val)))
        service = ToolService(args.median, args.fail, corpus)
        try:
            spec = {"task": args.task, "model": model, "steps": args.steps,
                    "eval_steps": args.eval_steps, "tool_url": service.url, "batch_size": 8,
                    "n_rollouts": 8, "learning_rate": 2e-4, "seed": 3, "max_new_tokens": 56,
                    "max_length": 576, "train_file": None,
                    "scale_lr_by_staleness": args.scale_lr_by_staleness}
            if args.task == "multistep":
                from _multistep_bench import spec_fields

                spec.update(spec_fields())
                spec["val_rows"] = args.val_rows or spec["val_rows"]  # None: the template's
            for rep in range(args.repeats):
                order = sides[rep % len(sides):] + sides[:rep % len(sides)]  # rotate
                for name in order:
                    res = run_side(name, {**spec, "repeat": rep}, work)
                    res["repeat"] = rep
                    results.append(res)
                    print(json.dumps({k: v for k, v in res.items()
                                      if k not in ("logs", "episodes")}),
                          file=sys.stderr, flush=True)
                    if args.out:
                        args.out.with_suffix(".runs.jsonl").open("a").write(
                            json.dumps(res) + "\n")
            tool_stats = service.stats()
        finally:
            service.stop()
    summary = {"cpu": cpu_model(), "cores": os.cpu_count(), "task": args.task,
               "steps": args.steps, "scale_lr_by_staleness": args.scale_lr_by_staleness,
               "tool": {"median_s": args.median, "fail": args.fail, **tool_stats},
               **summarise(results, args.target, args.task)}
    for sink in filter(None, (args.out,)):
        sink.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
