"""Gateway throughput vs raw batched ``model.generate`` on the same prompts, in one run.

For each concurrency c in (1, 8, 64): 64 chat requests (exactly 32 new tokens each, sampled at
temperature 1) go through the real gateway over HTTP with c in flight at a time; the same
rendered prompt ids go through ``model.generate`` in batches of c (left padded,
``min_new_tokens=max_new_tokens=32``). Prints generated tokens/s and the ratios; paste the table
into benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/gateway_throughput.py --size nano --threads 2
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

N_REQUESTS, NEW_TOKENS = 64, 32


def prompts(n: int) -> list[list[dict]]:
    from rltune.models.tasks import SYSTEM_PROMPT

    return [[{"role": "system", "content": SYSTEM_PROMPT},
             {"role": "user", "content": f"What is {17 + 3 * i} * {i % 9 + 2} + {i}?"}]
            for i in range(n)]


def raw_generate(model, tok, ids_list: list[list[int]], batch: int) -> float:
    import torch

    start = time.perf_counter()
    for b in range(0, len(ids_list), batch):
        chunk = ids_list[b:b + batch]
        longest = max(len(x) for x in chunk)
        ids = torch.full((len(chunk), longest), tok.pad_token_id)
        mask = torch.zeros_like(ids)
        for r, x in enumerate(chunk):
            ids[r, longest - len(x):] = torch.tensor(x)
            mask[r, longest - len(x):] = 1
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                                 temperature=1.0, top_k=0, top_p=1.0,
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 pad_token_id=tok.pad_token_id)
        assert out.shape[1] - longest == NEW_TOKENS
    return len(ids_list) * NEW_TOKENS / (time.perf_counter() - start)


async def through_gateway(base_url: str, chats: list, concurrency: int) -> float:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        async def one(msgs):
            async with sem:
                r = await http.post(base_url + "/chat/completions",
                                    headers={"Authorization": "Bearer bench"},
                                    json={"model": "m", "messages": msgs,
                                          "max_tokens": NEW_TOKENS, "min_tokens": NEW_TOKENS,
                                          "temperature": 1.0})
                r.raise_for_status()
                return r.json()["usage"]["completion_tokens"]

        start = time.perf_counter()
        counts = await asyncio.gather(*(one(m) for m in chats))
        elapsed = time.perf_counter() - start
    assert all(c == NEW_TOKENS for c in counts), counts
    return sum(counts) / elapsed


def client_process_run(base_url: str, concurrency: int) -> float:
    """Load generator entry point, run in a separate process like real rollouts."""
    return asyncio.run(through_gateway(base_url, prompts(N_REQUESTS), concurrency))


async def main(size: str, threads: int, repeats: int) -> None:
    import torch

    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway
    from rltune.models import build_tiny_model, save_model  # noqa: F401
    from rltune.models.factory import build_model
    from rltune.models.tokenizer import train_tokenizer

    torch.set_num_threads(threads)
    tok = train_tokenizer(seed=0)
    model = build_model(size, tok, seed=0)
    path = save_model(model, tok, Path(tempfile.mkdtemp()) / size)
    engine = TransformersEngine.from_pretrained(path, threads=threads, max_batch_size=64)
    gw = await Gateway.start(engine, static_keys=("bench",))
    chats = prompts(N_REQUESTS)
    ids_list = [list(tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True,
                                             return_dict=False)) for m in chats]
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"model {size} ({n_params:.2f}M params), threads {threads}, {N_REQUESTS} requests, "
          f"prompt {min(map(len, ids_list))}-{max(map(len, ids_list))} tokens, "
          f"{NEW_TOKENS} new tokens each; median of {repeats}")
    # Clients run in another process (as rollouts do), so they do not share the server's GIL.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    loop = asyncio.get_running_loop()

    async def remote(c: int) -> float:
        return await loop.run_in_executor(pool, client_process_run, gw.base_url, c)

    # warm-up both paths
    raw_generate(engine.model, tok, ids_list[:8], 8)
    await remote(8)
    rows = {}
    for c in (1, 8, 64):
        raws, gws = [], []
        for _ in range(repeats):
            raws.append(raw_generate(engine.model, tok, ids_list, c))
            gws.append(await remote(c))
        rows[c] = (sorted(raws)[len(raws) // 2], sorted(gws)[len(gws) // 2])
    serial = rows[1][1]
    print("| concurrency | raw generate tok/s | gateway tok/s | gateway / raw | "
          "gateway / gateway@1 |")
    print("|---|---|---|---|---|")
    for c, (raw, g) in rows.items():
        print(f"| {c} | {raw:.0f} | {g:.0f} | {g / raw:.2f} | {g / serial:.1f}x |")
    print("engine stats:", engine.stats)
    pool.shutdown()
    await gw.stop(close_engine=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="nano", choices=["tiny", "nano", "small"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    asyncio.run(main(args.size, args.threads, args.repeats))
