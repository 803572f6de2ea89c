"""``python -m rltune.reinforcement.component.server.server``: the cloud SDK's local function
server (``…component.server.server``), configured as the cloud's is, by environment only:

- ``FUNC_TYPE`` (``rollout|reward|group_reward``) and ``PROCESSOR_CLASS`` (``module.Class``,
  imported from the current folder, as ``PYTHONPATH=.`` does there): required;
- ``SERVER_PORT`` (8000), ``THREAD_POOL_WORKERS`` (32), ``THREAD_POOL_QUEUE`` (100);
- ``WORKERS_COUNT``: the cloud's uvicorn processes; rltune serves one process (its calls run
  ``THREAD_POOL_WORKERS`` at a time), so a value above 1 gets a note and one process.

It is rltune's function worker (``rltune functions serve``, ``rltune.functions.worker``):
``POST /api/v1`` and ``GET /health`` on 127.0.0.1.

Example (shell, in the workspace folder)::

    FUNC_TYPE=reward PROCESSOR_CLASS=functions.reward.reward.DemoRewardProcessor \\
        python -m rltune.reinforcement.component.server.server
"""

from __future__ import annotations

import os
import runpy
import sys


def main() -> int:
    workers = os.environ.get("WORKERS_COUNT", "").strip()
    if workers and workers != "1":
        print(f"note: WORKERS_COUNT={workers}: rltune serves one process here; its calls run "
              "THREAD_POOL_WORKERS at a time (a job's pool scales processes itself)",
              file=sys.stderr)
    os.environ.setdefault("RLTUNE_WORKSPACE", os.getcwd())
    sys.argv = ["python -m rltune.reinforcement.component.server.server"]
    try:  # the worker as a program (functions sit above this layer: run, not imported)
        runpy.run_module("rltune.functions.worker", run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
