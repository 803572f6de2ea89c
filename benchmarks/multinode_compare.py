"""Step time of the calculator job with its trainer on 1 node vs 2 nodes of a Ray cluster
(issue 29), on a local two-node Ray cluster on this machine (127.0.0.1; ``tests/ray_cluster.py``).

Both runs go through ``rltune train --ray-address`` on the same cluster (head and one worker
node, 2 CPUs each), so the rollout and reward functions run as Ray actors in both; same data,
seed and steps as ``dp_compare.py`` (the ``calc`` template on the nano model, GSPO, 8 questions
x 8 rollouts, no KL term, no validation or checkpoints):

* ``1 node``: ``nnodes_training: 1``: the one-process trainer in the job process;
* ``2 nodes``: ``nnodes_training: 2``, ``trainer_placement: strict_spread``: two gloo ranks,
  Ray actors, one on each node (``trainer/parallel/ray_ranks.py``).

Reported per run (means over the steps that updated, step 1 left out): ``timing/s/update``,
``timing/s/step``, rollouts and weight sync; the ratios ``seconds with 2 nodes / seconds with 1
node`` (below 1: two nodes are faster), each run's update seconds per rollout second (the
rollouts are the same work in both runs, so this is less moved by other load on a shared
machine), the ``lscpu`` model name and the load average. Both "nodes" share this machine's
cores, so this measures the overhead of the distribution, not a speed-up from more hardware.

    python benchmarks/multinode_compare.py [--steps 4] [--model DIR] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from dp_compare import cpu_model, make_job, timed_train

ROOT = Path(__file__).resolve().parents[1]


def run(root: Path, model_dir: str, steps: int, nodes: int, address: str) -> dict[str, Any]:
    ws = make_job(root / f"n{nodes}", model_dir, steps, 1)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    hp = job["training"]["hyper_parameters"]
    hp.pop("n_gpus_training", None)
    hp["nnodes_training"] = nodes
    if nodes > 1:
        hp["trainer_placement"] = "strict_spread"
    for fn in job["functions"]:  # one instance each, one CPU: the ranks get the rest
        fn["runtime"] = {**(fn.get("runtime") or {}), "cpu": 1, "capacity": 1,
                         "min_capacity": 1, "max_capacity": 1}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    timings = timed_train(ws, root / f"job{nodes}", "--ray-address", address)
    log = timings.pop("log")
    placed = next((ln[ln.index("data parallel on Ray"):] for ln in log.splitlines()
                   if "data parallel on Ray" in ln), "one process")
    return {"nodes": nodes, "trainer": placed, **timings}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--model", default=os.environ.get("RLTUNE_TEST_NANO", "nano"))
    p.add_argument("--out", default=None)
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from ray_cluster import LocalRayCluster

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one CPU per rank: its bundle
    os.environ.setdefault("RLTUNE_TORCH_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp, \
            LocalRayCluster(head_cpus=2, worker_nodes=1, worker_cpus=2) as cluster:
        runs = [run(Path(tmp), a.model, a.steps, nodes, cluster.address) for nodes in (1, 2)]
    one, two = runs
    summary = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_avg": os.getloadavg(),
        "runs": runs,
        "ratio_update_2_over_1": two["update_s"] / one["update_s"],
        "ratio_step_2_over_1": two["step_s"] / one["step_s"],
        "update_per_rollout_s": [r["update_s"] / r["rollout_s"] for r in runs],
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
