"""One check for a CUDA machine (≤ 6 min there): does rltune learn on the GPU, and how fast
are the engines against the GPU's weight-read bound?

1. **learning**: the calculator job (GSPO, the recipe of tests/trainer/test_learning.py, 10
   steps) with ``device`` set to the GPU; passes when the validation reward rises by ≥ 0.2
   (on CPU it goes 0.40 → 0.83 in 10 steps). Needs the demo ``nano`` model: ``--model DIR``
   (a built one, a few MB) or it is built here first (~1-2 min of CPU).
2. **engines**: a random-init model of Qwen2.5-0.5B's shape in bf16; 64 concurrent requests ×
   256 new tokens through the built-in engine, HF ``generate`` on the same prompts, and vLLM
   when it is installed. Each is compared to the weight-read bound: concurrency × measured
   memory bandwidth ÷ weight bytes (decode reads every weight once per step).
3. **memory**: peak device memory of each engine run and of the training job (if its metrics
   report one).

Results: ``<out>/gpu_check.json`` and ``<out>/gpu_check.md``. Exit code 0 when every phase
that ran passed, 1 otherwise, 3 when a dependency is missing.

It installs nothing big. The machine's own torch, transformers and accelerate are used; rltune's
small pure-Python dependencies (pydantic, fastapi, uvicorn, openai, ...) come as wheels::

    # on a machine with PyPI access (same Python minor version as the GPU machine):
    python benchmarks/gpu_check.py --fetch-wheels wheels --python-version 3.12
    # on the GPU machine, from the repository root (nothing else is installed):
    PYTHONPATH=src python benchmarks/gpu_check.py --wheels wheels --model nano --out out

On a CPU, ``--device cpu --tiny`` runs every phase at toy size (a 2-step job on an untrained
tiny model, a tiny engine model) to show the script works; ``--dry-run`` only checks the
dependencies and prints the plan.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: import name → pip name: what rltune needs next to torch/transformers (all small wheels).
NEEDED = {"pydantic": "pydantic", "yaml": "pyyaml", "typer": "typer", "rich": "rich",
          "httpx": "httpx", "opentelemetry": "opentelemetry-api", "fastapi": "fastapi",
          "uvicorn": "uvicorn", "psutil": "psutil", "orjson": "orjson", "packaging": "packaging",
          "openai": "openai", "huggingface_hub": "huggingface-hub", "tokenizers": "tokenizers",
          "safetensors": "safetensors", "torch": None, "transformers": None}
#: Qwen2.5-0.5B's shape (config.json of Qwen/Qwen2.5-0.5B-Instruct); TINY for --tiny.
QWEN05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
               num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
               max_position_embeddings=32768, tie_word_embeddings=True)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1024, max_position_embeddings=2048,
            tie_word_embeddings=True)


# -- dependencies ---------------------------------------------------------------------------


def missing_modules() -> list[str]:
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


def fetch_wheels(dest: Path, python_version: str) -> int:
    """``pip download`` the pure-Python dependencies (and their binary wheels) into ``dest``."""
    names = [p for p in NEEDED.values() if p] + ["uvloop", "httptools"]
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(dest),
           "--python-version", python_version, "--platform", "manylinux2014_x86_64",
           "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64", *names]
    print("+", " ".join(cmd))
    return subprocess.call(cmd)


def install_wheels(wheels: Path) -> None:
    missing = [NEEDED[m] for m in missing_modules() if NEEDED[m]]
    if missing:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
                               "--find-links", str(wheels), *missing])


def preflight() -> None:
    gone = missing_modules()
    if not gone:
        return
    big = [m for m in gone if NEEDED[m] is None]
    small = [NEEDED[m] for m in gone if NEEDED[m]]
    lines = [f"gpu_check: missing Python modules: {', '.join(gone)}"]
    if big:
        lines.append(f"  {', '.join(big)}: this script uses the machine's own; install them "
                     "from the machine's CUDA stack (not from this script)")
    if small:
        lines.append(f"  small wheels ({', '.join(small)}): on a machine with PyPI run\n"
                     "    python benchmarks/gpu_check.py --fetch-wheels wheels "
                     f"--python-version {sys.version_info.major}.{sys.version_info.minor}\n"
                     "  copy wheels/ here and rerun with --wheels wheels")
    print("\n".join(lines), file=sys.stderr)
    raise SystemExit(3)


# -- measurements ---------------------------------------------------------------------------


def peak_reset(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_gib(device: str) -> float:
    """Peak memory since the last reset: allocated CUDA memory, or this process's max RSS."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**30
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**30


def bandwidth_gbs(device: str, gib: float) -> float:
    """Measured copy bandwidth (read + write bytes per second) of ``device``, GB/s."""
    import torch

    n = int(gib * 2**30) // 4
    src = torch.empty(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up
    best = float("inf")
    for _ in range(5):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        dst.copy_(src)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    del src, dst
    return 2 * n * 4 / best / 1e9


def build_engine_model(shape: dict, device: str, dtype: str) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**shape, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                      eos_token_id=0, pad_token_id=0, bos_token_id=None)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(getattr(torch, dtype))
    return model.eval()


class _IdTokenizer:
    """The engine only needs pad/eos ids and a decoder for stop strings (none here)."""

    pad_token_id = eos_token_id = 0

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return " ".join(str(i) for i in ids)


def prompts(n: int, length: int, vocab: int) -> list[list[int]]:
    import random

    rng = random.Random(0)
    return [[rng.randrange(1, vocab) for _ in range(length)] for _ in range(n)]


def run_builtin(model: Any, ids: list[list[int]], new: int, work: Path) -> float:
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.engine.types import GenerationRequest, SamplingParams

    async def go() -> float:
        engine = TransformersEngine(model, _IdTokenizer(), threads=0, max_batch_size=len(ids),
                                    admit_window_s=0.05)
        sp = SamplingParams(max_tokens=new, ignore_eos=True, temperature=1.0)
        try:
            warm = GenerationRequest(prompt_ids=ids[0], sampling=sp.model_copy(
                update={"max_tokens": 4}))
            await engine.generate_one(warm)
            t = time.perf_counter()
            results = await asyncio.gather(*(engine.generate_one(GenerationRequest(
                prompt_ids=p, sampling=sp)) for p in ids))
            took = time.perf_counter() - t
        finally:
            await engine.close()
        made = sum(len(c.completion_ids) for r in results for c in r.completions)
        assert made == len(ids) * new, made
        return made / took

    return asyncio.run(go())


def run_hf_generate(model: Any, ids: list[list[int]], new: int, work: Path) -> float:
    import torch

    device = next(model.parameters()).device
    batch = torch.tensor(ids, device=device)  # equal lengths: no padding needed
    kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0)
    mask = torch.ones_like(batch)
    with torch.inference_mode():
        model.generate(input_ids=batch[:1], attention_mask=mask[:1], max_new_tokens=4,
                       min_new_tokens=4, **kw)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        out = model.generate(input_ids=batch, attention_mask=mask, max_new_tokens=new,
                             min_new_tokens=new, **kw)
        if device.type == "cuda":
            torch.cuda.synchronize()
    assert out.shape[1] - batch.shape[1] == new
    return len(ids) * new / (time.perf_counter() - t)


def run_vllm(model: Any, ids: list[list[int]], new: int, work: Path) -> float:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    path = work / "engine-model"
    model.save_pretrained(str(path))
    llm = LLM(model=str(path), skip_tokenizer_init=True, dtype="bfloat16",
              gpu_memory_utilization=0.35, max_model_len=len(ids[0]) + new + 16, seed=0)
    sp = SamplingParams(max_tokens=new, min_tokens=new, ignore_eos=True, temperature=1.0,
                        detokenize=False)
    reqs = [TokensPrompt(prompt_token_ids=p) for p in ids]
    llm.generate(reqs[:1], SamplingParams(max_tokens=4, detokenize=False), use_tqdm=False)
    t = time.perf_counter()
    outs = llm.generate(reqs, sp, use_tqdm=False)
    took = time.perf_counter() - t
    made = sum(len(o.outputs[0].token_ids) for o in outs)
    del llm
    return made / took


def engines_phase(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch

    shape = TINY if args.tiny else QWEN05B
    dtype = "float32" if args.device == "cpu" else "bfloat16"
    conc, new, plen = (8, 16, 16) if args.tiny else (64, 256, 64)
    out: dict[str, Any] = {"shape": "tiny" if args.tiny else "Qwen2.5-0.5B (random init)",
                           "dtype": dtype, "concurrency": conc, "new_tokens": new,
                           "prompt_tokens": plen}
    bw = bandwidth_gbs(args.device, 0.25 if args.tiny else 4.0)
    model = build_engine_model(shape, args.device, dtype)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    out["parameters_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 1)
    out["bandwidth_gbs"] = round(bw, 1)
    bound = conc * bw * 1e9 / weight_bytes
    out["weight_read_bound_tok_s"] = round(bound)
    ids = prompts(conc, plen, shape["vocab_size"])
    runs: dict[str, Callable[[Any, list[list[int]], int, Path], float]] = {
        "builtin": run_builtin, "hf_generate": run_hf_generate}
    if importlib.util.find_spec("vllm") is not None and args.device.startswith("cuda"):
        runs["vllm"] = run_vllm
    else:
        out["vllm"] = {"skipped": "vllm is not installed" if args.device.startswith("cuda")
                       else "CPU run"}
    for name, fn in runs.items():
        peak_reset(args.device)
        try:
            tps = fn(model, ids, new, work)
        except Exception as exc:  # one engine failing still reports the others
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            continue
        out[name] = {"tokens_per_s": round(tps, 1), "share_of_bound": round(tps / bound, 5),
                     "peak_memory_gib": round(peak_gib(args.device), 2)}
        print(f"engine {name}: {tps:.0f} tok/s ({tps / bound:.2%} of the weight-read bound)",
              flush=True)
    del model
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    out["ok"] = all("tokens_per_s" in out[n] for n in runs)
    return out


# -- the learning job -----------------------------------------------------------------------


def tiny_model(work: Path) -> Path:
    from rltune.models import build_tiny_model, save_model

    model, tok = build_tiny_model(seed=0)
    return save_model(model, tok, work / "tiny", meta={"size": "tiny"})


def learning_phase(args: argparse.Namespace, work: Path, deadline: float) -> dict[str, Any]:
    import yaml

    from rltune.config.hyperparams import HyperParameters
    from rltune.models.recipes import recipe_for
    from rltune.models.tasks import make_dataset_rows, write_jsonl
    from rltune.templates import TEMPLATES_DIR

    t0 = time.perf_counter()
    if args.tiny:
        model = str(tiny_model(work))
    elif args.model:
        from rltune.models.registry import resolve_model

        model = str(resolve_model(args.model))
    else:
        from rltune.models import ensure_demo_model

        print("building the nano model (pass --model to reuse one) …", flush=True)
        model = str(ensure_demo_model("nano", home=work / "home"))
    steps, val_rows = (2, 8) if args.tiny else (10, 80)
    ws = work / "calc"
    shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    task = recipe_for("nano").config.task
    write_jsonl(make_dataset_rows(steps * 8, "train", seed=1, config=task),
                ws / "data" / "train.jsonl")
    write_jsonl(make_dataset_rows(val_rows, "heldout", seed=0, config=task),
                ws / "data" / "val.jsonl")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    job["model"]["name"] = model
    hp = {"algorithm": "gspo", "batch_size": 8, "n_rollouts": 8, "learning_rate": 2e-4,
          "ppo_mini_batch_size": 32, "kl_loss_coef": 0.0, "max_length": 256,
          "max_prompt_length": 200, "eval_steps": max(1, steps // 2), "val_n_rollouts": 4,
          "save_strategy": "no", "seed": 3}
    out: dict[str, Any] = {"model": model, "steps": steps, "device": args.device}
    if "device" in HyperParameters.model_fields:
        hp["device"] = args.device
    elif args.device != "cpu":
        out.update(ok=False, error="this build's trainer has no `device` key: it trains on "
                   "the CPU only")
        return out
    job["training"]["hyper_parameters"] = hp
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "RLTUNE_HOME": str(work / "home"), "HF_HUB_OFFLINE": "1",
        "RLTUNE_TORCH_THREADS": str(min(8, os.cpu_count() or 2))}
    run = work / "run"
    cmd = [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(ws / "job.yaml"),
           "-O", str(run), "-q"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          timeout=max(30, deadline - time.monotonic()))
    out["seconds"] = round(time.perf_counter() - t0, 1)
    if proc.returncode != 0:
        out.update(ok=False, error=(proc.stderr or proc.stdout)[-2000:])
        return out
    summary = json.loads((run / "progress.json").read_text())
    before = summary.get("initial_validation")
    points = summary.get("validation") or []
    out.update(initial_validation=before, validation=points)
    peaks = [v for line in (run / "metrics.jsonl").read_text().splitlines()
             for k, v in json.loads(line).get("metrics", {}).items() if "memory" in k]
    if peaks:
        out["peak_memory_metric"] = max(peaks)
    if args.tiny:  # untrained model: only that it runs end to end
        out["ok"] = len(points) > 0
    else:
        rise = points[-1][1] - before if points and before is not None else None
        out["rise"] = rise
        out["ok"] = rise is not None and rise >= 0.2
    return out


# -- main -----------------------------------------------------------------------------------


def environment(device: str) -> dict[str, Any]:
    import torch
    import transformers

    env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "python": platform.python_version(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "transformers": transformers.__version__,
           "cpu_cores": os.cpu_count()}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(device))
        env["gpu"] = f"{p.name}, {p.total_memory / 2**30:.0f} GiB"
    if importlib.util.find_spec("vllm") is not None:
        import importlib.metadata as md

        env["vllm"] = md.version("vllm")
    return env


def markdown(result: dict[str, Any]) -> str:
    env, lines = result["environment"], []
    lines.append(f"## gpu_check ({env['date']})\n")
    lines.append(", ".join(f"{k} {v}" for k, v in env.items() if k != "date") + "\n")
    eng = result.get("engines") or {}
    if eng:
        lines.append(f"Engines: {eng.get('shape')} in {eng.get('dtype')}, "
                     f"{eng.get('concurrency')} concurrent × {eng.get('new_tokens')} new tokens; "
                     f"weight-read bound {eng.get('weight_read_bound_tok_s')} tok/s "
                     f"(bandwidth {eng.get('bandwidth_gbs')} GB/s).\n")
        lines.append("| engine | tokens/s | share of bound | peak memory GiB |")
        lines.append("|---|---|---|---|")
        for name in ("builtin", "hf_generate", "vllm"):
            r = eng.get(name) or {}
            if "tokens_per_s" in r:
                lines.append(f"| {name} | {r['tokens_per_s']} | {r['share_of_bound']:.2%} | "
                             f"{r['peak_memory_gib']} |")
            else:
                lines.append(f"| {name} | {r.get('error') or r.get('skipped', '-')} | | |")
        lines.append("")
    learn = result.get("learning") or {}
    if learn:
        lines.append(f"Learning ({learn.get('device')}, {learn.get('steps')} steps): "
                     f"validation {learn.get('initial_validation')} → {learn.get('validation')}"
                     f"; ok={learn.get('ok')} in {learn.get('seconds')} s"
                     + (f"; error: {learn['error'][-300:]}" if learn.get("error") else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:<i> or cpu")
    ap.add_argument("--tiny", action="store_true", help="toy sizes (for a CPU smoke run)")
    ap.add_argument("--dry-run", action="store_true", help="check dependencies, print the plan")
    ap.add_argument("--model", help="the nano model directory (else it is built here)")
    ap.add_argument("--out", default="gpu_check_out", help="where the results go")
    ap.add_argument("--wheels", help="folder of small wheels to install missing modules from")
    ap.add_argument("--fetch-wheels", metavar="DIR", help="download those wheels and exit")
    ap.add_argument("--python-version", default=f"{sys.version_info.major}."
                    f"{sys.version_info.minor}", help="for --fetch-wheels")
    ap.add_argument("--skip", action="append", default=[], choices=["learning", "engines"])
    ap.add_argument("--budget-s", type=float, default=330, help="stop starting phases after")
    args = ap.parse_args(argv)
    if args.fetch_wheels:
        return fetch_wheels(Path(args.fetch_wheels), args.python_version)
    if args.wheels:
        install_wheels(Path(args.wheels))
    preflight()
    sys.path.insert(0, str(ROOT / "src"))
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA device; use --device cpu "
              "--tiny for a smoke run", file=sys.stderr)
        return 3
    phases = [p for p in ("engines", "learning") if p not in args.skip]
    print(f"gpu_check: device {args.device}, {'tiny' if args.tiny else 'full'} sizes, "
          f"phases {', '.join(phases)}", flush=True)
    if args.dry_run:
        return 0
    deadline = time.monotonic() + args.budget_s
    result: dict[str, Any] = {"environment": environment(args.device), "args": vars(args)}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        if "engines" in phases:
            result["engines"] = engines_phase(args, work)
        if "learning" in phases:
            if time.monotonic() > deadline - 60:
                result["learning"] = {"ok": False, "error": "skipped: out of time"}
            else:
                try:
                    result["learning"] = learning_phase(args, work, deadline + 60)
                except subprocess.TimeoutExpired:
                    result["learning"] = {"ok": False, "error": "timed out"}
    (out_dir / "gpu_check.json").write_text(json.dumps(result, indent=2, default=str))
    (out_dir / "gpu_check.md").write_text(markdown(result))
    print(markdown(result))
    return 0 if all(result[p].get("ok") for p in phases) else 1


if __name__ == "__main__":
    sys.exit(main())
