"""How fast the console's trajectory pages answer for a step of 10,000 trajectories.

Runs a real job server and a real (tiny-model) job, appends 10,000 trajectories to one step
with the trainer's own writer, then times the REST calls the Trajectories tab makes, and the
time until headless Chromium shows the first page of the list (when Chromium is installed).

    .venv/bin/python benchmarks/console_trajectories.py [--n 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "console"))

from console_harness import ServerProc, submit_calc_job  # noqa: E402


def timed(fn, repeat: int = 5) -> float:
    """Median seconds of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    args = ap.parse_args()
    from rltune.models import build_tiny_model, save_model
    from rltune.trainer.sink import FileSink

    work = Path(tempfile.mkdtemp(prefix="console-bench-"))
    model, tok = build_tiny_model(seed=0)
    model_dir = save_model(model, tok, work / "tiny", meta={"size": "tiny"})
    (work / "home").mkdir()
    server = ServerProc.start(work / "home")
    try:
        job = submit_calc_job(server, work / "job", model_dir, name="bench", n_epochs=1)
        server.wait(job, {"SUCCEEDED"})
        job_dir = server.home / "server" / "jobs" / job
        base = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
        rng = random.Random(0)
        sink = FileSink(job_dir)
        sink.trajectories(
            99,
            (
                {
                    **base[i % len(base)],
                    "rollout_id": f"big-{i:05d}",
                    "sample_index": i // 8,
                    "reward": rng.random(),
                }
                for i in range(args.n)
            ),
        )
        sink.close()
        size_mb = (job_dir / "trajectories" / "step_000099.jsonl").stat().st_size / 2**20
        p = f"/v1/jobs/{job}"
        calls = {
            "steps list": lambda: server.call("GET", f"{p}/trajectories/steps"),
            "page 1 (50)": lambda: server.call(
                "GET", f"{p}/trajectories", params={"step": 99, "page_size": 50}
            ),
            "page 1, min_reward=0.9": lambda: server.call(
                "GET", f"{p}/trajectories", params={"step": 99, "min_reward": 0.9}
            ),
            "last page": lambda: server.call(
                "GET", f"{p}/trajectories", params={"step": 99, "page_no": args.n // 50}
            ),
            "one trajectory": lambda: server.call("GET", f"{p}/trajectories/99/big-05000"),
            "one group (8)": lambda: server.call(
                "GET", f"{p}/trajectories/99/groups", params={"sample_index": 600}
            ),
        }
        print(f"step of {args.n} trajectories, {size_mb:.1f} MB of JSONL")
        print("| call | median s |\n|---|---|")
        # The first call after the step file changed indexes it (one full read).
        first = timed(calls["page 1 (50)"], repeat=1)
        print(f"| first call after the step file changed (builds the index) | {first:.3f} |")
        for name, fn in calls.items():
            print(f"| {name} | {timed(fn):.3f} |")
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            return
        if not Path("/usr/bin/chromium").exists():
            return
        with sync_playwright() as pw:
            b = pw.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--headless", "--no-sandbox", "--disable-gpu"],
            )
            page = b.new_page()
            page.goto(server.url + "/")
            page.fill("#api-key", server.key)
            page.click("#login-btn")
            page.wait_for_selector("#jobs-table")
            t = time.perf_counter()
            page.goto(f"{server.url}/#/jobs/{job}/trajectories?step=99")
            page.wait_for_selector("#traj-table tr[data-rid]")
            first = time.perf_counter() - t
            t = time.perf_counter()
            page.click("#traj-table tr[data-rid] a.open-traj")
            page.wait_for_selector("#replay")
            replay = time.perf_counter() - t
            b.close()
        print(f"| browser: open the step, first page shown | {first:.3f} |")
        print(f"| browser: click a row, replay shown | {replay:.3f} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
