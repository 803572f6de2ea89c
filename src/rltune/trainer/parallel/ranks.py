"""Trainer ranks of a data-parallel job (``n_gpus_training: N`` > 1, one node).

The job process stays the one controller: it runs the engine, the gateway, the function pools
and the rollouts, and it is rank 0 of the update. It starts N-1 update-only rank processes
(``python -m rltune.trainer.parallel.rank_worker``), joined through a ``TCPStore`` it hosts on
127.0.0.1 (gloo on the CPU, NCCL on CUDA with one GPU per rank). Each rank loads the policy
itself, shards it with FSDP2 (``trainer/parallel/distributed.py``) and waits for commands on
its stdin.

The training step sees a ``RankedUpdater`` (``trainer/parallel/ranked.py``) over
``LocalRanks``, this module's transport: each call that touches the sharded model (update,
log-probs, gathering weights or optimizer state, loading them) is a ``RankCommand``, first sent to
the other ranks (a pickled ``(command, argument)`` on each rank's stdin), then run here; the
collectives inside keep the ranks in step. Rank 0 gathers the full weights for the engine's weight
sync and for checkpoints.

Why this design: there is one process to operate (cancel, logs, resume are the job's own), no
launcher or cluster manager; the rows reach the other ranks through a pipe, not a collective,
so a rank waiting for the next step has no collective timeout.

A rank never outlives the job: it dies with its parent (``PR_SET_PDEATHSIG``), it stops on EOF
of its stdin (the job process is gone), it stays in the job's process group (the job server's
cancel kills the group), it ignores Ctrl-C (the job process stops it), and ``close`` stops
and reaps every rank. A rank that exits during a step fails the job with a
``TrainingFailedError`` naming the rank, its exit code and the tail of its log
(``<job_dir>/ranks/rank-<r>.log``).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Optional, TypeVar

import torch

from rltune._process import die_with_parent
from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.sdk.errors import ConfigError, TrainingFailedError
from rltune.trainer.parallel.distributed import (
    DataParallelUpdater,
    init_data_parallel,
    shard_policy,
)
from rltune.trainer.parallel.rank_worker import RankCommand, rank_commands
from rltune.trainer.parallel.ranked import RankedUpdater

T = TypeVar("T")

#: How long ``close`` waits for a rank to stop before killing it.
STOP_GRACE_S = 10.0


class RankGroup:
    """Rank 0's handle on ranks 1..N-1: their processes, logs and command pipes."""

    def __init__(self, world_size: int, log_dir: Path):
        self.world_size, self.log_dir = world_size, log_dir
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.store: Any = None

    def spawn(self, header: dict[str, Any]) -> None:
        """Host the rendezvous store and start the other ranks (they then load the policy)."""
        from torch.distributed import TCPStore

        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.store = TCPStore("127.0.0.1", 0, self.world_size, True, wait_for_workers=False,
                              timeout=datetime.timedelta(minutes=30))
        env = {**os.environ, "OMP_NUM_THREADS": str(header["threads"])}
        for rank in range(1, self.world_size):
            with open(self.log_path(rank), "ab") as log:
                # Popen in the loop's thread: PDEATHSIG fires when the forking *thread* exits.
                proc = subprocess.Popen(
                    [sys.executable, "-m", "rltune.trainer.parallel.rank_worker"],
                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                    preexec_fn=die_with_parent())
            self.procs[rank] = proc
            self._write(rank, {**header, "rank": rank, "world_size": self.world_size,
                               "port": self.store.port})

    def log_path(self, rank: int) -> Path:
        return self.log_dir / f"rank-{rank}.log"

    def send(self, command: RankCommand, argument: Any = None) -> None:
        """Give every other rank its next command (they run it as rank 0 runs its own); the
        pipe carries the command's name (the rank process runs this module as ``__main__``)."""
        for rank in self.procs:
            self._write(rank, (command.value, argument))

    def _write(self, rank: int, obj: Any) -> None:
        proc = self.procs[rank]
        try:
            pickle.dump(obj, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[arg-type]
            proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError) as err:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            raise self.failure(rank) from err

    def dead(self) -> Optional[int]:
        """The first rank whose process has exited (with any code), or None."""
        return next((r for r, p in self.procs.items() if p.poll() is not None), None)

    def failure(self, rank: int) -> TrainingFailedError:
        code = self.procs[rank].poll()
        try:
            tail = self.log_path(rank).read_text(errors="replace").strip().splitlines()[-8:]
        except OSError:
            tail = []
        how = "is not responding" if code is None else f"exited with code {code}"
        return TrainingFailedError(
            f"trainer rank {rank} of {self.world_size} {how}" +
            (": " + " | ".join(tail) if tail else ""),
            where=f"trainer rank {rank}",
            hint=f"see {self.log_path(rank)} for the rank's whole output")

    async def watch(self, work: Awaitable[T]) -> T:
        """Await ``work`` (rank 0's share of a collective step) while watching the other
        ranks: a rank that exits fails the step with an error naming it."""
        task = asyncio.ensure_future(work)
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.5)
            if done:
                break
            rank = self.dead()
            if rank is not None:  # rank 0's collective fails soon (the peer's socket closed)
                await asyncio.wait({task}, timeout=5)
                raise self.failure(rank)
        try:
            return task.result()
        except Exception as exc:
            rank = await asyncio.to_thread(self.wait_dead)
            if rank is not None:  # a rank that crashed mid-step is the cause, not rank 0
                raise self.failure(rank) from exc
            raise

    def wait_dead(self, within: float = 2.0) -> Optional[int]:
        """After rank 0's share of a call failed: the rank that exited meanwhile, if any."""
        deadline = time.monotonic() + within
        while True:
            rank = self.dead()
            if rank is not None or time.monotonic() > deadline:
                return rank
            time.sleep(0.1)

    async def stop(self) -> None:
        """Stop every rank (``stop``, then SIGKILL after ``STOP_GRACE_S``) and reap it."""
        for rank, proc in self.procs.items():
            if proc.poll() is None:
                try:
                    self._write(rank, (RankCommand.STOP.value, None))
                    proc.stdin.close()  # type: ignore[union-attr]
                except Exception:
                    pass
        for proc in self.procs.values():
            try:
                await asyncio.to_thread(proc.wait, STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)


class LocalRanks(RankGroup):
    """The ``RankTransport`` of one machine (``trainer/parallel/ranked.py``): this process is rank 0
    (``inner``, its share of the sharded policy) and ranks 1..N-1 are the group's processes.
    A command is written to every other rank's stdin, then run here with the handlers every
    rank runs (``rank_worker.rank_commands``)."""

    def __init__(self, world_size: int, log_dir: Path):
        super().__init__(world_size, log_dir)
        self.inner: Optional[DataParallelUpdater] = None
        self.commands: dict[RankCommand, Callable[[Any], Any]] = {}

    def join(self, inner: DataParallelUpdater) -> None:
        """Rank 0's updater, once the group is joined and the policy sharded."""
        self.inner, self.commands = inner, rank_commands(inner)

    @property
    def model(self) -> Optional[torch.nn.Module]:
        return self.inner.model if self.inner is not None else None  # rank 0's shard

    def call(self, command: RankCommand, argument: Any) -> Any:
        if self.inner is None:
            raise RuntimeError("the local ranks are not started")
        if self.inner.dp.device.type == "cuda":  # the current device is per thread
            torch.cuda.set_device(self.inner.dp.device)
        self.send(command, argument)
        try:
            return self.commands[command](argument)
        except Exception as exc:  # a sync call (old log-probs, a checkpoint) outside watch
            rank = self.wait_dead()
            if rank is not None:
                raise self.failure(rank) from exc
            raise

    async def close(self) -> None:
        """Stop the other ranks and leave the process group."""
        import torch.distributed as dist

        await self.stop()
        if dist.is_initialized():
            dist.destroy_process_group()


async def start_ranked_updater(model: torch.nn.Module, hp: HyperParameters,
                               knobs: AlgorithmKnobs, *, world_size: int, model_path: Path,
                               device: torch.device, total_steps: int, pad_token_id: int,
                               log_dir: Path,
                               reference_model: Optional[torch.nn.Module] = None,
                               ) -> RankedUpdater[LocalRanks]:
    """Start ranks 1..N-1, join them as rank 0 and shard ``model`` (the loaded policy);
    ``reference_model``: rank 0's frozen KL reference (the other ranks load their own)."""
    kind = device.type
    first = (device.index or 0) if kind == "cuda" else 0
    if kind == "cuda" and first + world_size > torch.cuda.device_count():
        raise ConfigError(
            f"n_gpus_training: {world_size} needs GPUs {first}..{first + world_size - 1}, and "
            f"this machine has {torch.cuda.device_count()}",
            where="training.hyper_parameters.n_gpus_training",
            hint=f"set n_gpus_training to at most {torch.cuda.device_count() - first}")
    ranks = LocalRanks(world_size, log_dir)
    header = {"hp": hp, "knobs": knobs, "model_path": str(model_path), "device": kind,
              "cuda_first": first, "total_steps": total_steps, "pad_token_id": pad_token_id,
              "threads": torch.get_num_threads()}
    try:
        ranks.spawn(header)
        dp = await ranks.watch(asyncio.to_thread(
            init_data_parallel, kind, store=ranks.store, rank=0, world_size=world_size,
            cuda_index=first if kind == "cuda" else None))
        if kind == "cuda":
            torch.cuda.set_device(dp.device)
        shard_policy(model, dp)
        ranks.join(DataParallelUpdater(model, hp, knobs, total_steps=total_steps, dp=dp,
                                       pad_token_id=pad_token_id,
                                       reference_model=reference_model))
    except BaseException:
        await ranks.close()
        raise
    return RankedUpdater(ranks, pad_token_id)
