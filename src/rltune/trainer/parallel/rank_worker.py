"""One update-only trainer rank (rank >= 1) of a data-parallel job: ``python -m
rltune.trainer.parallel.rank_worker``, started by ``trainer/parallel/ranks.py`` in the job process.

It reads pickled objects from its stdin: first a header (hyper-parameters, model path, rank,
world size, the rendezvous port), then ``(command, argument)`` pairs, the same calls rank 0
makes on its own updater. It joins the process group, loads and shards the policy exactly as
rank 0 does, and runs each command until ``stop`` or EOF (the job process is gone). Any error
ends the process with a traceback in its log (``<job_dir>/ranks/rank-<r>.log``), which rank 0
reports.

``RankServer`` is the rank itself (join, load, shard, run commands); the Ray actors of
``trainer/parallel/ray_ranks.py`` (``nnodes_training`` on a cluster) run it too, for every rank.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rltune.trainer.parallel.distributed import DataParallelUpdater


class RankCommand(str, Enum):
    """The calls ``RankedUpdater`` (``trainer/parallel/ranked.py``) makes on every rank, the
    same over local pipes (``trainer/parallel/ranks.py``) and Ray actors
    (``trainer/parallel/ray_ranks.py``)."""

    UPDATE = "update"
    LOGPROBS = "logprobs"
    WEIGHTS = "weights"
    STATE = "state"
    LOAD_WEIGHTS = "load_weights"
    LOAD_STATE = "load_state"
    SAVE_SHARDED = "save_sharded"
    LOAD_SHARDED = "load_sharded"
    SCHEDULE = "schedule"
    LOAD_SCHEDULE = "load_schedule"
    STOP = "stop"  # local ranks only: the stdin loop ends


def rank_commands(updater: DataParallelUpdater) -> dict[RankCommand, Callable[[Any], Any]]:
    """What a rank runs for each command: the call of ``updater`` (this rank's share of the
    sharded policy) that rank 0 makes, with its one argument. Every rank runs these, rank 0
    too (``trainer/parallel/ranks.py`` in the job process, ``trainer/parallel/ray_ranks.py``
    in an actor)."""
    from rltune.trainer.parallel.distributed import full_state_dict

    C, model = RankCommand, updater.model
    commands: dict[RankCommand, Callable[[Any], Any]] = {
        C.UPDATE: updater.update,
        C.LOGPROBS: updater.compute_logprobs,
        C.WEIGHTS: lambda _: full_state_dict(model),
        C.STATE: lambda _: updater.state_dict(),
        C.LOAD_WEIGHTS: updater.load_weights,
        C.LOAD_STATE: updater.load_state_dict,
        C.SAVE_SHARDED: updater.save_sharded,
        C.LOAD_SHARDED: updater.load_sharded,
        C.SCHEDULE: lambda _: updater.schedule_state(),
        C.LOAD_SCHEDULE: updater.load_schedule_state,
    }
    assert set(commands) == set(RankCommand) - {C.STOP}, "a rank command has no handler"
    return commands


def _exit_when_orphaned(parent: int) -> None:
    """Belt and braces for PR_SET_PDEATHSIG: leave once the job process is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


class RankServer:
    """One non-driving trainer rank: joins the group, loads and shards the policy exactly as
    rank 0 does, and runs rank 0's calls (``run(command, argument)``). Used by this module's
    stdin loop (local ranks) and by the Ray actors of ``trainer/parallel/ray_ranks.py``, which
    run every rank, 0 included, as a ``RankServer``.

    ``header``: ``hp``, ``knobs``, ``model_path``, ``device``, ``cuda_first`` (CUDA: rank r
    uses GPU ``cuda_first + r``), ``total_steps``, ``pad_token_id``, ``threads``, ``rank``,
    ``world_size``; ``store``: the joined ``torch.distributed.Store``."""

    def __init__(self, header: dict[str, Any], store: Any):
        import torch

        from rltune.trainer.parallel.distributed import (
            DataParallelUpdater,
            init_data_parallel,
            shard_policy,
        )
        from rltune.trainer.policy import load_policy

        h = header
        torch.set_num_threads(int(h["threads"]))
        cuda = (h["cuda_first"] + h["rank"] if h.get("cuda_index") is None
                else h["cuda_index"]) if h["device"] == "cuda" else None
        self.dp = dp = init_data_parallel(h["device"], store=store, rank=h["rank"],
                                          world_size=h["world_size"], cuda_index=cuda)
        hp, knobs = h["hp"], h["knobs"]
        torch.manual_seed(hp.seed)
        model, reference = load_policy(
            Path(h["model_path"]), hp, knobs, dp.device,
            lambda msg, **_: print(f"rank {dp.rank}: {msg}", flush=True))
        shard_policy(model, dp)  # the KL reference (if any) stays whole on every rank
        self.model = model
        self.updater = DataParallelUpdater(
            model, hp, knobs, total_steps=h["total_steps"], dp=dp,
            pad_token_id=h["pad_token_id"], reference_model=reference)
        self.commands = rank_commands(self.updater)
        print(f"rank {dp.rank} of {dp.world_size} ready on {dp.device} (pid {os.getpid()})",
              flush=True)

    def run(self, command: RankCommand | str, argument: Any) -> Any:
        return self.commands[RankCommand(command)](argument)

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def serve(stream: Any) -> None:
    import torch.distributed as dist

    h = pickle.load(stream)
    store = dist.TCPStore("127.0.0.1", int(h["port"]), is_master=False)
    server = RankServer(h, store)
    while True:
        try:
            command, argument = pickle.load(stream)
        except EOFError:
            break
        if command == RankCommand.STOP:
            break
        server.run(command, argument)
    server.close()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the job process, which stops us
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    serve(sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    main()
    # After ``destroy_process_group`` torch 2.13's gloo can abort in the interpreter's exit
    # (a C++ thread still joinable in a static destructor; about one exit in 8 on CPU), which
    # printed "terminate called without an active exception" into a finished job's log.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
