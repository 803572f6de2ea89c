"""Seed sweep of the learning test: synchronous vs streaming rollouts (issue 31, item 5).

Trains the warm-started nano calculator agent (the learning test's job: GSPO, 8 x 8, lr 2e-4)
in each mode for every seed, one run after another, and reports per mode the mean and spread
(population standard deviation, min, max) of the final validation reward, with the off-policy
diagnostics of every step: behaviour weight mean and capped share, KL(behaviour || prox),
clip fraction, and the rollouts dropped as stale.

    python benchmarks/staleness_sweep.py --steps 10 --seeds 3,4,5,6,7 \\
        [--modes sync,stale1,stale2p] [--out sweep.json] [--update-delay 3]
    python benchmarks/staleness_sweep.py --task multistep --steps 20 --eval-every 4 --seeds 3,4,5,6

``--task multistep`` trains the ``multistep`` template's job instead (the ``nano-multistep``
demo model, GSPO 8 chains x 8, its learning rate and sampling temperatures; 64 held-out
chains).

Modes: ``sync`` (max_staleness 0), ``stale1`` (max_staleness 1), ``stale2p`` (max_staleness 2,
partial rollouts). Each run appends one JSON line to ``--out`` as soon as it ends, so an
interrupted sweep keeps what it measured.

Stress and diagnosis: ``--update-delay S`` sleeps S s before every update, so each batch is as
stale as the bound allows (all tokens N versions old: the regime where the drift ran away,
benchmarks/RESULTS.md); ``--check-versions`` recomputes every token under the weights of its
tagged version (``version_check.py``); ``--behaviour-bound`` sets the updater's divergence mask
(``inf``: off, the code before the mask); ``--behaviour-level token`` the behaviour weight per
token for every algorithm (GSPO's is otherwise the sequence's likelihood ratio);
``--adam-beta1`` AdamW's momentum decay (0.9 as shipped); ``--answer-anywhere`` (calc) the
reward before session 22, which took the last answer anywhere in the final message, not only one
that ends it (to reproduce the earlier sweeps); ``--scale-lr-by-staleness`` runs the async
modes with ``scale_lr_by_staleness: true``; ``--lr`` the learning rate;
``--eval-every`` the validation interval; ``--report a.jsonl ...`` summarises earlier runs
without training. Every run's line records the diagnoses it ran under and the instruction set
(``ATEN_CPU_CAPABILITY``, ``default`` when unset) as ``settings``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).parent))
import _multistep_bench
import version_check
from async_compare import PIPELINE_MODES, cpu_model, make_job, pipeline_knobs

MODES = PIPELINE_MODES
VAL = "validation/data/reward/mean@1"
DIAG = ("fully_async/behaviour_weight/mean", "fully_async/behaviour_weight/capped_frac",
        "fully_async/behaviour_weight/masked_frac",
        "fully_async/behaviour_kl", "actor/pg_clipfrac", "actor/ppo_kl",
        "fully_async/dropped_stale_rollouts",
        "fully_async/staleness/mean", "fully_async/staleness/max", "fully_async/lr_scale",
        "fully_async/token_share/staleness_1", "fully_async/token_share/staleness_2",
        "critic/rewards/mean", "actor/entropy", "actor/grad_norm",
        "trace/reward_metrics/exact/format/mean", "trajectory/response_length/mean")


def set_behaviour_bound(bound: float) -> None:
    """Every ``PolicyUpdater`` of this process masks off-policy tokens at ``bound``."""
    from rltune.trainer.update import PolicyUpdater

    plain_init = PolicyUpdater.__init__

    def init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        plain_init(self, *args, **kwargs)
        self.behaviour_bound = bound

    PolicyUpdater.__init__ = init  # type: ignore[method-assign]


def set_behaviour_level(level: str) -> None:
    """Every update computes the behaviour weight per ``level`` (``token`` or ``sequence``)
    whatever the algorithm's importance level (a diagnosis of the weight's variance)."""
    import rltune.trainer.update as update

    plain = update.behaviour_weight_BT

    def weight(prox, behav, mask, _level="token", **kw):  # type: ignore[no-untyped-def]
        return plain(prox, behav, mask, level, **kw)

    update.behaviour_weight_BT = weight  # type: ignore[assignment]


def set_adam_beta1(beta1: float) -> None:
    """Every policy optimizer of this process uses AdamW's first-moment decay ``beta1``
    (0.9 as shipped): a diagnosis of how long the momentum keeps pushing a stale direction."""
    import rltune.trainer.update as update

    plain = update.build_optimizer

    def build(model, hp):  # type: ignore[no-untyped-def]
        opt = plain(model, hp)
        for group in opt.param_groups:
            group["betas"] = (beta1, group["betas"][1])
        return opt

    update.build_optimizer = build  # type: ignore[assignment]


def slow_updates(delay_s: float) -> None:
    """Add ``delay_s`` seconds to every policy update, so the stream runs as far ahead as the
    bound allows and each batch is as stale as ``max_staleness`` permits (the worst case a
    slow or loaded trainer gives)."""
    import time

    from rltune.trainer.update import PolicyUpdater

    plain = PolicyUpdater.update

    def update(self, rows):  # type: ignore[no-untyped-def]
        time.sleep(delay_s)
        return plain(self, rows)

    PolicyUpdater.update = update  # type: ignore[method-assign]


def make_multistep_job(root: Path, model: str, steps: int, eval_steps: int,
                       extra: dict[str, Any]) -> Path:
    """The ``multistep`` template's workspace and job, with the sweep's changes only."""
    import yaml

    from rltune.templates import create_workspace

    ws = create_workspace(root / "ws", "multistep", train_rows=steps * 8, val_rows=64)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = model
    hp = job["training"]["hyper_parameters"]
    for key in ("save_steps", "save_total_limit"):
        hp.pop(key, None)
    hp.update(max_steps=steps, eval_steps=eval_steps, save_strategy="no", **extra)
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def answer_anywhere_reward(ws: Path) -> None:
    """Make the calculator workspace's reward take the last answer anywhere in the final
    message (``models.tasks.extract_answer``), as it did before session 22, instead of only an
    answer that ends it: the reward under which the earlier sweeps saw late drops."""
    reward = ws / "functions" / "reward.py"
    text = reward.read_text()
    if "answer_at_end" not in text:
        raise SystemExit(f"--answer-anywhere: {reward} has no answer_at_end to replace")
    reward.write_text(text.replace("answer_at_end", "extract_answer"))


async def run_one(mode: str, seed: int, model: str, steps: int, val_n: int,
                  lr: float = 2e-4, eval_every: Optional[int] = None,
                  task: str = "calc", answer_anywhere: bool = False,
                  scale_lr: bool = False) -> dict[str, Any]:
    from rltune.config import load_job_config
    from rltune.trainer.loop import Trainer
    from rltune.trainer.sink import read_metrics

    version_check.RECORDS.clear()
    root = Path(tempfile.mkdtemp(prefix=f"sweep-{mode}-{seed}-"))
    extra = {**pipeline_knobs(mode, scale_lr), "seed": seed, "val_n_rollouts": val_n,
             "learning_rate": lr}
    build = make_multistep_job if task == "multistep" else make_job
    ws = build(root, model, steps, eval_every or max(1, steps // 2), extra)
    if answer_anywhere:
        answer_anywhere_reward(ws)
    job_dir = root / "job"
    summary = await Trainer(load_job_config(ws / "job.yaml"), job_dir=job_dir,
                            base_dir=ws).run()
    per_step = []
    for row in read_metrics(job_dir):
        m = row["metrics"]
        per_step.append({"step": row["step"], **{k.split("/", 1)[1]: round(m[k], 4)
                                                  for k in (*DIAG, VAL) if k in m}})
    shutil.rmtree(root, ignore_errors=True)
    vals = [v for _, v in summary["validation"]]
    return {"task": task, "mode": mode, "seed": seed, "initial": summary["initial_validation"],
            "final": vals[-1] if vals else None, "validation": summary["validation"],
            "steps": per_step, "versions": version_check.RECORDS.copy()}


DROP = 0.1  # a run "drops" when it ends more than this below its best validation


def stats(xs: list[float]) -> dict[str, float]:
    """Mean, population sd, min, median and max, rounded to 3 places."""
    return {"mean": round(statistics.mean(xs), 3), "sd": round(statistics.pstdev(xs), 3),
            "min": round(min(xs), 3), "median": round(statistics.median(xs), 3),
            "max": round(max(xs), 3)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: final and best validation (best over every validation after step 0), the
    gain from step 0, and how many runs end more than ``DROP`` below their best."""
    out: dict[str, Any] = {}
    for mode in sorted({r["mode"] for r in runs}):
        done = [r for r in runs if r["mode"] == mode and r["final"] is not None]
        if not done:
            continue
        finals = [float(r["final"]) for r in done]
        bests = [max(v for _, v in r["validation"]) for r in done]
        gains = [float(r["final"]) - r["initial"] for r in done]
        drops = [max(v for _, v in r["validation"]) - r["final"] > DROP for r in done]
        out[mode] = {"runs": len(done), "seeds": [r["seed"] for r in done],
                     "final": stats(finals), "best": stats(bests),
                     "gain_mean": round(statistics.mean(gains), 3),
                     "dropped_from_best": sum(drops)}
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=("calc", "multistep"), default="calc",
                    help="the calculator learning job, or the multistep template's")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seeds", default="3,4,5,6,7")
    ap.add_argument("--modes", default="sync,stale1,stale2p")
    ap.add_argument("--eval-every", type=int, default=None,
                    help="validate every N steps (default: steps // 2)")
    ap.add_argument("--report", type=Path, nargs="*", default=None,
                    help="summarise these jsonl files (no runs)")
    ap.add_argument("--val-n", type=int, default=2,
                    help="val_n_rollouts (calc: 80 held-out rows, multistep: 64)")
    ap.add_argument("--model", default=None,
                    help="the model (default: calc $RLTUNE_TEST_NANO or the nano demo model, "
                    "multistep nano-multistep)")
    ap.add_argument("--out", type=Path, default=Path("staleness_sweep.jsonl"))
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default: calc the learning test's 2e-4, multistep the "
                    "template's)")
    ap.add_argument("--update-delay", type=float, default=0.0,
                    help="seconds added to every update: batches as stale as the bound allows")
    ap.add_argument("--behaviour-bound", type=float, default=None,
                    help="the updater's behaviour_bound (default: losses."
                    "BEHAVIOUR_LOG_RATIO_BOUND; inf turns the divergence mask off)")
    ap.add_argument("--behaviour-level", choices=("token", "sequence"), default=None,
                    help="the behaviour weight's level for every algorithm (default: the "
                    "algorithm's importance_sampling_level)")
    ap.add_argument("--adam-beta1", type=float, default=None,
                    help="AdamW's beta1 for every update (default: 0.9, as shipped)")
    ap.add_argument("--answer-anywhere", action="store_true",
                    help="calc: the reward takes the last answer anywhere in the final message "
                    "(as before session 22), not only one that ends it")
    ap.add_argument("--scale-lr-by-staleness", action="store_true",
                    help="the async modes run with scale_lr_by_staleness: true (each update's "
                    "rate divided by 1 + its tokens' mean staleness)")
    ap.add_argument("--check-versions", action="store_true",
                    help="recompute each token's log-prob under the weights of its tagged "
                    "version (version_check.py); per step in the run's 'versions'")
    args = ap.parse_args(argv)
    if args.report is not None:
        runs = [json.loads(line) for p in args.report for line in p.read_text().splitlines()
                if line.strip()]
        print(json.dumps(summarise(runs), indent=1))
        return 0
    if args.behaviour_bound is not None:
        set_behaviour_bound(args.behaviour_bound)
    if args.behaviour_level is not None:
        set_behaviour_level(args.behaviour_level)
    if args.adam_beta1 is not None:
        set_adam_beta1(args.adam_beta1)
    if args.check_versions:
        version_check.install(args.update_delay)
    elif args.update_delay:
        slow_updates(args.update_delay)
    model = args.model
    if not model and args.task == "multistep":
        from rltune.models.registry import resolve_model

        model = str(resolve_model("nano-multistep"))
    elif not model:
        model = os.environ.get("RLTUNE_TEST_NANO")
    if not model:
        from rltune.models import ensure_demo_model

        model = str(ensure_demo_model("nano", seed=0))
    lr = args.lr if args.lr is not None else 2e-4 if args.task == "calc" else float(
        _multistep_bench.template_hp()["learning_rate"])
    settings = {"lr": lr, "behaviour_bound": args.behaviour_bound,
                "behaviour_level": args.behaviour_level, "adam_beta1": args.adam_beta1,
                "update_delay": args.update_delay, "answer_anywhere": args.answer_anywhere,
                "scale_lr_by_staleness": args.scale_lr_by_staleness,
                "isa": os.environ.get("ATEN_CPU_CAPABILITY", "default")}
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for mode in args.modes.split(","):  # alternate modes within each seed
            res = asyncio.run(run_one(mode, seed, model, args.steps, args.val_n, lr,
                                      args.eval_every, args.task, args.answer_anywhere,
                                      args.scale_lr_by_staleness))
            res["settings"] = settings
            runs.append(res)
            with args.out.open("a") as fh:
                fh.write(json.dumps(res) + "\n")
            print(mode, seed, res["initial"], res["final"], file=sys.stderr, flush=True)
    print(json.dumps({"cpu": cpu_model(), "task": args.task, "steps": args.steps, **settings,
                      "summary": summarise(runs)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
