"""rltune's trainer side by side with TRL's ``GRPOTrainer`` (issue 5), in one run.

Both sides train the same warm-started nano model on the same single-turn calculator prompts
(system prompt + calculator tool schema + question; one sampled answer per rollout; reward 1
for the exact answer, 0 otherwise, so a tool call scores 0), with the same batch (prompts x
generations), max new tokens, learning rate, optimizer settings, number of steps, β = 0, fp32
and the same torch thread count. Each side runs in its own process, one after the other
(``--repeats 2`` alternates the order to spread machine-load drift over both sides).

Reported: median wall seconds per step (time between consecutive step ends, first step
excluded: it includes warm-up), mean reward over the first and the last steps, and the
ratios rltune / TRL. For rltune, the median of each ``timing/s/*`` step metric shows where
its time goes.

What is the same / what differs (TRL 1.16):

* loss: TRL ``loss_type="grpo"`` (token ratio, ε = 0.2, per-sequence token mean then mean)
  = rltune ``algorithm: grpo`` (``seq-mean-token-mean``), β = 0 on both (no reference model).
* advantages: ``(r - mean_g) / (std_g + ε)`` with the unbiased std on both; ε = 1e-4 in TRL,
  1e-6 in rltune (only matters for groups whose rewards are all equal: both give 0).
* old log-probs: with one mini-batch per step TRL uses the detached current log-probs (ratio
  exactly 1); rltune recomputes them with an extra no-grad forward pass (same value).
* rollouts: TRL samples in-process with ``model.generate`` on a left-padded batch of 32;
  rltune makes one HTTP chat call per rollout to its policy gateway (continuous-batching
  engine on a second copy of the weights, synced after each update), and scores through a
  reward worker process over HTTP. TRL prefills all 32 prompts whole; rltune's engine
  prefills each distinct prompt once and the prefix they share (system prompt + tool
  schema) once (``rltune.engine.prefill``): the same tokens reach the model, fewer are
  computed.
* prompts: TRL gets the prompt text rendered with the model's chat template and the tool
  schema (TRL passes only its own tool callables to the template); the script checks that
  TRL's tokenization of that text equals the ids the gateway feeds the engine.
* data order: both see every training row exactly once (1 epoch of steps x batch rows), each
  in its own seeded shuffle.
* zero-advantage rollouts: rltune leaves rollouts whose group rewards are all equal out of
  the update (no gradient, less compute), so its seq-mean divides by the rollouts with a
  signal; TRL (like verl) keeps them in the batch and divides by all 32. Under gradient
  clipping and Adam this mostly changes the relative weight of steps with little signal.
* TRL's ``GRPOConfig`` turns gradient checkpointing on by default; it is off here (it saves
  memory on big models and costs a recomputed forward pass; rltune does not checkpoint).
  ``--trl-gradient-checkpointing`` keeps TRL's default.
* rewards: the same rule on both sides (``rltune.models.tasks.is_correct``), in-process for
  TRL, in the calc template's ``CalcReward`` worker process for rltune.

Rewards of 20-30-step runs vary a lot from run to run (32 samples per step, unseeded
sampling), hence ``--repeats`` (default 3, about 6-9 minutes on a loaded 2-core box).

``--rltune-side trl`` runs rltune's side as a TRL script with the import changed to
``rltune.trl`` (``_rltune_trl_side.py``: ``GRPOTrainer`` / ``GRPOConfig`` with TRL's names)
instead of the job YAML.

Example::

    .venv/bin/python benchmarks/trl_compare.py --model /tmp/rlhome/models/nano
    .venv/bin/python benchmarks/trl_compare.py --steps 12 --last 4 --repeats 1  # smoke run
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def make_rows(kind: str, n: int, seed: int, task: Any) -> list[dict[str, Any]]:
    """``n`` training rows: bare questions, or questions whose calculator result is in the prompt.

    ``question``: system + user question; the warm-started nano mostly answers with a tool call
    (reward 0 in one turn) and rarely gets a direct answer right, so rewards stay near 0 and
    most groups carry no signal. ``after-tool``: the conversation up to the tool result (the
    assistant's calculator call and the tool message are part of the prompt), so the one
    sampled turn must give the final answer; rewards start mid-range and can rise in 30 steps.
    """
    from rltune.models.tasks import CALCULATOR_TOOL, make_dataset_rows, sample_tasks
    from rltune.models.transcripts import tool_transcript

    if kind == "question":
        return make_dataset_rows(n, "train", seed=seed, config=task)
    return [
        {
            "messages": tool_transcript(t)[:-1],
            "tools": [CALCULATOR_TOOL],
            "rollout_extra": {"solution": t.answer},
        }
        for t in sample_tasks(n, "train", seed, task)
    ]


def build_spec(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Resolve the model, write the training rows and check both sides see the same prompt ids."""
    from rltune.models import load_tokenizer, read_meta
    from rltune.models.tasks import TaskConfig, write_jsonl

    if args.model:
        model_dir = Path(args.model).resolve()
    else:
        from rltune.models import ensure_demo_model

        print("building / finding the nano demo model ...", flush=True)
        model_dir = Path(ensure_demo_model("nano", home=args.home))
    meta = read_meta(model_dir) or {}
    task = TaskConfig(**{k: tuple(v) if k == "ops" else v
                         for k, v in (meta.get("task") or {}).items()})
    rows = make_rows(args.prompts, args.steps * args.batch_size, args.data_seed, task)
    train_file = write_jsonl(rows, work / "train.jsonl")

    tok = load_tokenizer(model_dir)
    longest = 0
    for i, row in enumerate(rows):
        text = tok.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False,
                                       add_generation_prompt=True)
        gateway_ids = tok.encode(text, add_special_tokens=False)  # rltune.gateway.chat
        trl_ids = tok(text=[text])["input_ids"][0]  # GRPOTrainer on plain-text prompts
        if gateway_ids != trl_ids:
            raise SystemExit(f"row {i}: TRL would tokenize the prompt differently from the "
                             "gateway; the comparison would not be like for like")
        longest = max(longest, len(gateway_ids))
    return {
        "model_dir": str(model_dir),
        "train_file": str(train_file),
        "steps": args.steps,
        "batch_size": args.batch_size,
        "n_rollouts": args.n_rollouts,
        "max_new_tokens": args.max_new_tokens,
        "max_prompt_length": longest,
        "learning_rate": args.lr,
        "weight_decay": args.weight_decay,
        "threads": args.threads,
        "seed": args.seed,
        "prompts": args.prompts,
        "trl_gradient_checkpointing": args.trl_gradient_checkpointing,
    }


def run_side(side: str, spec_file: Path, work: Path, threads: int,
             script: str = "") -> dict[str, Any]:
    """Run one side in a fresh process and return its JSON result (``script``: the side's
    file when it is not ``_<side>_side.py``)."""
    out = work / f"{side}-{time.monotonic_ns()}.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    path = HERE / (script or f"_{side}_side.py")
    proc = subprocess.run([sys.executable, str(path), str(spec_file), str(out)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"the {side} side failed (exit {proc.returncode}); its output is above")
    result = json.loads(out.read_text())
    result["process_s"] = time.perf_counter() - t0
    return result


def step_seconds(result: dict[str, Any]) -> list[float]:
    """Wall seconds of steps 2..N: the gaps between consecutive step ends."""
    ends = result["step_ends"]
    return [b - a for a, b in itertools.pairwise(ends)]


def summarize(results: list[dict[str, Any]], side: str, last: int) -> dict[str, Any]:
    runs = [r for r in results if r["side"] == side]
    secs = [s for r in runs for s in step_seconds(r)]
    first = [statistics.fmean(r["rewards"][:last]) for r in runs]
    final = [statistics.fmean(r["rewards"][-last:]) for r in runs]
    return {
        "runs": len(runs),
        "steps": [len(r["rewards"]) for r in runs],
        "median_step_s": statistics.median(secs),
        "p90_step_s": sorted(secs)[int(0.9 * (len(secs) - 1))],
        "reward_first": statistics.fmean(first),
        "reward_last": statistics.fmean(final),
        "reward_last_runs": final,
        "median_step_s_runs": [statistics.median(step_seconds(r)) for r in runs],
        "completion_len": statistics.fmean(x for r in runs for x in r["completion_length"]),
        "process_s": statistics.fmean(r["process_s"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "threads": sorted({r["threads"] for r in runs}),
    }


def breakdown(results: list[dict[str, Any]], side: str) -> str:
    """Median seconds per phase over steps 2..N (rltune: its ``timing/s/*`` step metrics)."""
    per_key: dict[str, list[float]] = {}
    for r in results:
        if r["side"] != side:
            continue
        if side == "trl":
            for key in ("generate_s", "reward_s"):
                per_key.setdefault(key.removesuffix("_s"), []).extend(r[key][1:])
            continue
        per_key.setdefault("reward (wall, inside rollout)", []).extend(r["reward_s"][1:])
        for m in r["logs"][1:]:
            for k, v in m.items():
                if k.startswith("timing/s/") and "/avg" not in k:
                    per_key.setdefault(k.removeprefix("timing/s/"), []).append(v)
    text = " · ".join(f"{k} {statistics.median(v):.3f}" for k, v in sorted(per_key.items()))
    stats = [r.get("engine_stats") or {} for r in results if r["side"] == side]
    if side == "rltune" and all(stats):
        steps = sum(len(r["rewards"]) for r in results if r["side"] == side)
        text += (f" · engine forwards per step: {sum(s['prefills'] for s in stats) / steps:.1f}"
                 f" prefill, {sum(s['steps'] for s in stats) / steps:.1f} decode")
        if all("prefill_tokens" in s for s in stats):  # shared-prefix prefill (engine/prefill.py)
            text += (f" · prefill tokens per step: "
                     f"{sum(s['prefill_tokens'] for s in stats) / steps:.0f} computed of "
                     f"{sum(s['prompt_tokens'] for s in stats) / steps:.0f} prompt tokens")
    return text


def report(spec: dict[str, Any], results: list[dict[str, Any]], last: int,
           load: tuple[float, float]) -> str:
    trl, ours = summarize(results, "trl", last), summarize(results, "rltune", last)

    def runs(values: list[float]) -> str:
        return " / ".join(f"{v:.2f}" for v in values)

    def ratio(key: str) -> str:
        return f"{ours[key] / trl[key]:.2f}" if trl[key] else "n/a (TRL is 0)"

    lines = [
        f"model {spec['model_dir']} · {spec['steps']} steps · {spec['batch_size']} prompts x "
        f"{spec['n_rollouts']} generations · prompts {spec['prompts']} · "
        f"max new tokens {spec['max_new_tokens']} · "
        f"lr {spec['learning_rate']} · β 0 · torch threads {spec['threads']} · "
        f"runs per side {trl['runs']} · 1-min load average {load[0]:.1f} before, "
        f"{load[1]:.1f} after",
        "",
        "| | TRL GRPOTrainer | rltune | rltune / TRL |",
        "|---|---|---|---|",
        f"| median s/step (steps 2..N) | {trl['median_step_s']:.3f} | "
        f"{ours['median_step_s']:.3f} | {ratio('median_step_s')} |",
        f"| p90 s/step | {trl['p90_step_s']:.3f} | {ours['p90_step_s']:.3f} | "
        f"{ratio('p90_step_s')} |",
        f"| reward, mean of first {last} steps | {trl['reward_first']:.3f} | "
        f"{ours['reward_first']:.3f} | {ratio('reward_first')} |",
        f"| reward, mean of last {last} steps | {trl['reward_last']:.3f} | "
        f"{ours['reward_last']:.3f} | {ratio('reward_last')} |",
        f"| per run: median s/step | {runs(trl['median_step_s_runs'])} | "
        f"{runs(ours['median_step_s_runs'])} | |",
        f"| per run: reward of last {last} steps | {runs(trl['reward_last_runs'])} | "
        f"{runs(ours['reward_last_runs'])} | |",
        f"| mean completion tokens | {trl['completion_len']:.1f} | "
        f"{ours['completion_len']:.1f} | |",
        f"| process wall s (imports, start-up, all steps) | {trl['process_s']:.1f} | "
        f"{ours['process_s']:.1f} | |",
        f"| peak RSS of the main process, MB | {trl['peak_rss_mb']:.0f} | "
        f"{ours['peak_rss_mb']:.0f} | |",
        "",
        f"TRL phases (median s): {breakdown(results, 'trl')} (the rest of a step is the "
        "loss forward/backward and the optimizer)",
        f"rltune phases (median s): {breakdown(results, 'rltune')} (rollout includes the "
        "reward calls; update only runs on rollouts with a non-zero advantage)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", help="model directory (default: the nano demo model in --home)")
    p.add_argument("--home", default=None, help="RLTUNE_HOME for building the nano model")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=8, help="prompts per step")
    p.add_argument("--n-rollouts", type=int, default=4, help="generations per prompt")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-4,
                   help="2e-3 collapsed both sides' rewards to 0 within a few steps")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads, both sides (0 = rltune.models' auto_threads(): 1 "
                        "unless the load average leaves a core free; 2 threads on busy cores "
                        "made HF generate ~10x slower here)")
    p.add_argument("--seed", type=int, default=3, help="seed of the first repeat (+1 each)")
    p.add_argument("--data-seed", type=int, default=1)
    p.add_argument("--last", type=int, default=10, help="steps averaged for the reward")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs per side; the order alternates (TRL first, then rltune first)")
    p.add_argument("--prompts", choices=("after-tool", "question"), default="after-tool",
                   help="single-turn prompt kind (see make_rows)")
    p.add_argument("--trl-gradient-checkpointing", action="store_true",
                   help="keep TRL's default gradient checkpointing (off here: it only saves "
                        "memory and costs a second forward pass; rltune does not checkpoint)")
    p.add_argument("--rltune-side", choices=("yaml", "trl"), default="yaml",
                   help="rltune's side: its job config (yaml), or the same run written as a "
                        "TRL script with the import changed to rltune.trl (trl)")
    p.add_argument("--json", help="also write all per-step results here")
    args = p.parse_args(argv)
    if args.steps <= args.last:
        p.error("--steps must be larger than --last")
    if args.threads <= 0:
        from rltune.models.warmstart import auto_threads

        args.threads = auto_threads()

    with tempfile.TemporaryDirectory(prefix="trl-compare-") as tmp:
        work = Path(tmp)
        spec = build_spec(args, work)
        load_before = os.getloadavg()[0]
        results = []
        for i in range(args.repeats):
            # A new seed per repeat: TRL's sampling is seeded, so equal seeds would repeat
            # its run exactly and its reward would be one sample, not several.
            spec_file = work / f"spec-{i}.json"
            spec_file.write_text(json.dumps({**spec, "seed": args.seed + i}))
            order = ("trl", "rltune") if i % 2 == 0 else ("rltune", "trl")
            for side in order:
                print(f"run {i + 1}/{args.repeats}: {side} ...", flush=True)
                script = "_rltune_trl_side.py" if (side, args.rltune_side) == ("rltune", "trl") \
                    else ""
                result = run_side(side, spec_file, work, args.threads, script)
                print(f"  {len(result['rewards'])} steps, median "
                      f"{statistics.median(step_seconds(result)):.3f} s/step, "
                      f"{result['process_s']:.0f} s in all", flush=True)
                results.append(result)
        text = report(spec, results, args.last, (load_before, os.getloadavg()[0]))
    print()
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"spec": spec, "results": results}, indent=1))


if __name__ == "__main__":
    main()
