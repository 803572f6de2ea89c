"""Trainer ranks as Ray actors across the nodes of a cluster (``nnodes_training`` with a Ray
cluster: ``function_backend: ray`` or ``--ray-address``).

``nnodes_training: N`` x ``n_gpus_training: M`` ranks (M unset: 1) are placed with one Ray
placement group, one bundle per rank (``trainer_placement``: Ray's ``SPREAD`` by default,
``PACK``, ``STRICT_SPREAD`` or ``STRICT_PACK``). Each bundle reserves what a rank uses
(:func:`rank_resources`): ``trainer_cpus_per_rank`` CPUs (and one GPU on CUDA); unset, on the
CPU the job process's torch threads but no more than half the smallest node of the cluster
has (the rest is room for the job's functions and engine replicas), on CUDA one CPU. A CPU
rank runs as many torch threads as it reserves whole CPUs. Every rank, 0 included, is a
:class:`TrainerRankActor` running the same :class:`RankServer` as a local rank
(``trainer/parallel/rank_worker.py``): it joins the process group through a ``TCPStore`` that
rank 0 hosts on its node's address (gloo on the CPU, NCCL on CUDA), loads the policy from
model files the driver put into the object store once, and shards it with FSDP2.

The job process stays the controller (engine, gateway, functions, checkpoints' side files) and
drives the ranks: the step's updater is a ``RankedUpdater`` (``trainer/parallel/ranked.py``) over
:class:`RayRanks`, this module's transport; each call is given to every rank in the same order
(the rows are put into the object store once) and rank 0's answer is the call's (metrics,
gathered full weights for the engine's weight sync).

A rank that fails, a killed rank process and a lost node fail the call with a
``TrainingFailedError`` naming the rank, its node (id and address) and Ray's reason; closing
the updater (the job's runtime always does, also after an error) kills every rank's actor and
removes the placement group, so the cluster's resources are free again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import shutil
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, Optional, TypeVar

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.sdk.errors import ConfigError, TrainingFailedError
from rltune.trainer.parallel.rank_worker import RankCommand
from rltune.trainer.parallel.ranked import RankedUpdater

T = TypeVar("T")

WHERE = "training.hyper_parameters.nnodes_training"
#: How long the placement group may wait for the cluster's resources before the job fails.
PLACEMENT_TIMEOUT_S = float(os.environ.get("RLTUNE_RAY_PLACEMENT_TIMEOUT", "300"))
#: How long a failed call waits for the other ranks' answers, to find the rank that died.
_DIAGNOSE_S = 10.0
#: Environment variables a rank inherits from the job process (network and thread settings).
_PASS_ENV = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "TORCH_NCCL_BLOCKING_WAIT")
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _bind_collectives_to_this_node() -> None:
    """Gloo and NCCL on the interface of this node's cluster address (not what the hostname
    resolves to, often loopback), unless the job set ``GLOO_SOCKET_IFNAME`` /
    ``NCCL_SOCKET_IFNAME``; nothing to do on a one-host (loopback) cluster."""
    import ray

    from rltune._ray import interface_of, is_loopback, node_address

    own = node_address(ray, "a trainer rank")
    name = None if is_loopback(own) else interface_of(own)
    if name:
        for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            os.environ.setdefault(var, name)


class TrainerRankActor:
    """One trainer rank in a Ray actor (its node's temp folder holds the shipped model)."""

    def __init__(self, files: dict[str, bytes]):
        from rltune.engine.ray_replica import unpack_model_files

        self.dir = unpack_model_files(files, "rltune-rank-")
        self.store: Any = None
        self.server: Any = None

    def info(self) -> dict[str, Any]:
        import ray

        from rltune._ray import node_address

        return {"node": ray.get_runtime_context().get_node_id(), "host": node_address(ray),
                "pid": os.getpid()}

    def open_store(self, host: str, world_size: int) -> int:
        """Rank 0: host the rendezvous store on this node; its port."""
        from torch.distributed import TCPStore

        self.store = TCPStore(host, 0, world_size, True, wait_for_workers=False,
                              timeout=datetime.timedelta(minutes=30))
        return int(self.store.port)

    def start(self, header: dict[str, Any], host: str, port: int,
              log_path: Optional[str] = None) -> None:
        """Join the group and load and shard the policy (every rank at once). ``log_path``:
        the job folder's ``ranks/rank-<r>.log``, used when this node sees that folder."""
        import sys

        from torch.distributed import TCPStore

        from rltune.trainer.parallel.rank_worker import RankServer

        if log_path and Path(log_path).parent.is_dir():  # a shared job folder
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(fd, 1)  # this actor's own worker process: its output, tracebacks
            os.dup2(fd, 2)
            os.close(fd)

        _bind_collectives_to_this_node()
        store = self.store or TCPStore(host, port, is_master=False,
                                       timeout=datetime.timedelta(minutes=30))
        self.server = RankServer({**header, "model_path": str(self.dir)}, store)

    def call(self, command: str, argument: Any) -> Any:
        return self.server.run(command, argument)

    def sees(self, path: str) -> bool:
        return Path(path).is_file()

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclasses.dataclass
class RankPlace:
    """Where a rank runs: its Ray node id, that node's address and the actor's pid."""

    rank: int
    node: str
    host: str
    pid: int

    def describe(self) -> str:
        return f"node {self.node[:12]} ({self.host})"


def smallest_node_cpus(nodes: Sequence[dict[str, Any]]) -> Optional[float]:
    """The fewest CPUs a live node of ``ray.nodes()`` has (nodes without CPUs left out)."""
    cpus = [float(n.get("Resources", {}).get("CPU", 0)) for n in nodes if n.get("Alive", True)]
    return min((c for c in cpus if c > 0), default=None)


def rank_resources(cuda: bool, threads: int, cpus_per_rank: Optional[float] = None,
                   smallest_node: Optional[float] = None) -> tuple[dict[str, float], int]:
    """What one Ray trainer rank reserves (its placement bundle) and its torch threads.

    ``cpus_per_rank`` is ``trainer_cpus_per_rank``; unset, a CPU rank takes the driver's
    ``threads`` but no more than half of ``smallest_node`` (whole CPUs from 2 up): every node
    can hold a rank and keeps room for the job's function actors and engine replicas, placed
    on the same nodes after the ranks. A CUDA rank takes one CPU next to its GPU (it runs
    ``threads``).

    >>> rank_resources(False, threads=2, smallest_node=1.0)
    ({'CPU': 0.5}, 1)
    >>> rank_resources(False, threads=2, smallest_node=16.0)
    ({'CPU': 2.0}, 2)
    >>> rank_resources(True, threads=4, cpus_per_rank=3)
    ({'GPU': 1.0, 'CPU': 3.0}, 3)
    """
    if cpus_per_rank is not None:
        cpus, rank_threads = float(cpus_per_rank), max(1, int(cpus_per_rank))
    elif cuda:
        cpus, rank_threads = 1.0, threads
    else:
        half = None if smallest_node is None else float(smallest_node) / 2
        cap = None if half is None else (float(int(half)) if half >= 1 else half)
        cpus = float(threads) if cap is None else min(float(threads), cap)
        rank_threads = max(1, int(cpus))
    return ({"GPU": 1.0, "CPU": cpus} if cuda else {"CPU": cpus}), rank_threads


class RayRanks:
    """The ``RankTransport`` of a Ray cluster (``trainer/parallel/ranked.py``): the driver's
    handle on the ranks' actors (every rank, 0 included) and their placement group. A command's
    argument is put into the object store once and given to every actor; rank 0's answer is the
    call's.
    """

    #: the policy lives on the ranks' actors, none in this process (PPO's critic needs one)
    model = None

    def __init__(self, ray: Any, world_size: int, log_dir: Optional[Path] = None):
        self.ray, self.world_size, self.log_dir = ray, world_size, log_dir
        self.actors: list[Any] = []
        self.places: list[RankPlace] = []
        self.pg: Any = None
        self.rendezvous = ""  # rank 0's store, host:port (every rank connects to it)
        self._closed = False

    def place(self, bundle: dict[str, float], strategy: str, timeout: float,
              cpus: str = "") -> None:
        """Reserve one bundle per rank; fail with the cluster's free resources on timeout
        (``cpus`` says where the bundle's CPUs came from)."""
        from ray.util.placement_group import placement_group

        self.pg = placement_group([dict(bundle) for _ in range(self.world_size)],
                                  strategy=strategy, name=f"rltune-trainer-{os.getpid()}")
        ready, _ = self.ray.wait([self.pg.ready()], timeout=timeout)
        if not ready:
            free = {k: v for k, v in self.ray.available_resources().items()
                    if k in ("CPU", "GPU")}
            raise ConfigError(
                f"{self.world_size} trainer rank(s) could not be placed on the Ray cluster "
                f"within {timeout:.0f} s: each asks for {bundle}{cpus} with strategy "
                f"{strategy}; "
                f"the cluster has {free} free",
                where=WHERE, hint="add nodes, lower nnodes_training x n_gpus_training or "
                "trainer_cpus_per_rank (the CPUs each rank reserves), or change "
                "trainer_placement")

    def spawn(self, files_ref: Any, bundle: dict[str, float], env: dict[str, Any]) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        cls = self.ray.remote(TrainerRankActor)
        for rank in range(self.world_size):
            strategy = PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=rank)
            self.actors.append(cls.options(
                num_cpus=bundle.get("CPU", 0), num_gpus=bundle.get("GPU", 0), max_restarts=0,
                runtime_env=env, scheduling_strategy=strategy,
                name=f"rltune-trainer-rank-{rank}-{os.getpid()}").remote(files_ref))
        infos = self.wait([a.info.remote() for a in self.actors], "start")
        self.places = [RankPlace(r, i["node"], i["host"], i["pid"])
                       for r, i in enumerate(infos)]

    def wait(self, refs: list[Any], what: str) -> list[Any]:
        """Every rank's answer to ``refs`` (one per rank), or the first failure, named."""
        ray = self.ray
        pending, index = list(refs), {ref: r for r, ref in enumerate(refs)}
        results: dict[int, Any] = {}
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    results[index[ref]] = ray.get(ref)
                except Exception as exc:
                    raise self.failure(index[ref], exc, pending, index, what) from exc
        return [results[r] for r in range(len(refs))]

    def failure(self, rank: int, exc: BaseException, pending: list[Any],
                index: dict[Any, int], what: str) -> TrainingFailedError:
        """The error of a failed call, naming the rank that caused it: a rank whose actor
        died (a killed process, a lost node) rather than a rank whose collective then broke."""
        ray = self.ray
        died = isinstance(exc, ray.exceptions.RayActorError)
        deadline = time.monotonic() + _DIAGNOSE_S
        while not died and pending and time.monotonic() < deadline:
            done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in done:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as other:
                    rank, exc, died = index[ref], other, True
                    break
                except Exception:
                    pass
        place = self.places[rank] if rank < len(self.places) else None
        where = place.describe() if place else "an unplaced node"
        lost = place is not None and not _node_alive(ray, place.node)
        reason = _reason(exc)
        how = ("died: its node was lost" if lost else "died") if died else "failed"
        log = self.log_path(rank)
        try:
            tail = log.read_text(errors="replace").strip().splitlines()[-4:] if log else []
        except OSError:
            tail = []
        return TrainingFailedError(
            f"trainer rank {rank} of {self.world_size} on {where} {how} during {what}: "
            f"{reason}" + (" | its log: " + " | ".join(tail) if tail else ""),
            where=f"trainer rank {rank}",
            hint=(f"see {log} for the rank's whole output" if tail else
                  "the rank's own output is in its node's Ray session logs "
                  "(<ray temp dir>/session_latest/logs/worker-*.err; `ray logs`)"))

    def log_path(self, rank: int) -> Optional[Path]:
        return self.log_dir / f"rank-{rank}.log" if self.log_dir is not None else None

    def call(self, command: RankCommand, argument: Any) -> Any:
        ref = self.ray.put(argument)
        refs = [a.call.remote(command.value, ref) for a in self.actors]
        return self.wait(refs, command.value)[0]

    async def watch(self, work: Awaitable[T]) -> T:
        """A failed or lost rank already fails the call itself (``wait``)."""
        return await work

    def check_shared(self, folder: str | Path) -> None:
        """Refuse sharded checkpoints in a folder some rank's node does not share: every rank
        must see a file the job process writes there."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".rltune-shared-probe-{os.getpid()}"
        probe.write_text("probe")
        try:
            seen = self.wait([a.sees.remote(str(probe)) for a in self.actors],
                                   "start")
        finally:
            probe.unlink(missing_ok=True)
        blind = [p for p, ok in zip(self.places, seen, strict=True) if not ok]
        if blind:
            raise ConfigError(
                f"checkpoint_format: sharded needs the checkpoint folder {folder} on a "
                "filesystem every trainer rank shares; "
                + ", ".join(f"rank {p.rank} on {p.describe()}" for p in blind)
                + " cannot see it",
                where="training.hyper_parameters.checkpoint_format",
                hint="put the job folder on a shared filesystem (NFS, a mounted bucket), or "
                     "use checkpoint_format: full (rank 0 writes the whole checkpoint)")

    async def close(self) -> None:
        """``shutdown``, then leave the cluster."""
        from rltune._ray import disconnect

        try:
            await asyncio.to_thread(self.shutdown)
        finally:
            disconnect()

    def shutdown(self, grace: float = 10.0) -> None:
        """Stop every rank (then kill its actor) and remove the placement group."""
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        stops = []
        for actor in self.actors:
            try:
                stops.append(actor.stop.remote())
            except Exception:
                pass
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=grace)
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        if self.pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.pg)
            except Exception:
                pass


def _node_alive(ray: Any, node: str) -> bool:
    try:
        return any(n.get("NodeID") == node and n.get("Alive") for n in ray.nodes())
    except Exception:
        return True


def _reason(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    text = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[:3])[:600]


def start_ray_ranked_updater(hp: HyperParameters, knobs: AlgorithmKnobs, *,
                             address: Optional[str], world_size: int, model_path: Path,
                             device: torch.device, total_steps: int, pad_token_id: int,
                             placement: str = "spread", threads: Optional[int] = None,
                             ship_rltune: bool = True,
                             place_timeout: float = PLACEMENT_TIMEOUT_S,
                             log_dir: Optional[Path] = None) -> RankedUpdater[RayRanks]:
    """Place ``world_size`` ranks on the cluster at ``address`` (else ``RAY_ADDRESS``), start
    them and return the driver's updater once every rank has loaded and sharded the policy.
    ``log_dir``: where each rank writes ``rank-<r>.log`` when its node sees that folder (a
    shared job folder); otherwise its output stays in Ray's logs on its node."""
    from rltune._ray import connect, disconnect, ship_package
    from rltune.engine.ray_replica import model_files

    ray = connect(address, what="nnodes_training with a Ray cluster", where=WHERE)
    cuda = device.type == "cuda"
    cpus = hp.trainer_cpus_per_rank
    bundle, threads = rank_resources(
        cuda, threads or torch.get_num_threads(), cpus,
        None if cpus is not None or cuda else smallest_node_cpus(ray.nodes()))
    group = RayRanks(ray, world_size, Path(log_dir) if log_dir is not None else None)
    try:
        env: dict[str, Any] = {"env_vars": {
            **dict.fromkeys(_THREAD_VARS, str(threads)),
            **{k: os.environ[k] for k in _PASS_ENV if k in os.environ}}}
        if ship_rltune:
            env.update(ship_package())
        group.place(bundle, placement.upper(), place_timeout, cpus=(
            f" (trainer_cpus_per_rank: {cpus:g})" if cpus is not None else
            " (trainer_cpus_per_rank unset: " + ("1 per GPU rank)" if cuda else
                                                 "the job's torch threads, at most half "
                                                 "the smallest node's CPUs)")))
        group.spawn(ray.put(model_files(model_path)), bundle, env)
        host = group.places[0].host
        port = group.wait([group.actors[0].open_store.remote(host, world_size)], "start")[0]
        group.rendezvous = f"{host}:{port}"
        header = {"hp": hp, "knobs": knobs, "device": device.type, "cuda_first": 0,
                  "cuda_index": 0 if cuda else None, "total_steps": total_steps,
                  "pad_token_id": pad_token_id, "threads": threads,
                  "world_size": world_size}
        if log_dir is not None:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        group.wait([a.start.remote({**header, "rank": r}, host, port,
                                   str(group.log_path(r)) if log_dir is not None else None)
                    for r, a in enumerate(group.actors)], "start")
    except BaseException:
        group.shutdown()
        disconnect()
        raise
    return RankedUpdater(group, pad_token_id)
