"""Data-parallel policy updates with torch.distributed and FSDP2 (``fully_shard``): gloo on the
CPU, NCCL on GPUs. One process per rank, launched by ``torchrun`` (which sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``).

Every rank is given the same rows. The loss of a mini-batch keeps its global normaliser
(``agg_normalizer`` over all of the mini-batch's rows); each rank runs the forward/backward
passes of its share of the rows (``rows[rank::world]``, in ``micro_batch_size`` chunks) and
FSDP sums the shards' gradients (divide factor 1), so the summed gradient is exactly the
one-process gradient. Ranks with fewer chunks run zero-weighted passes, because FSDP's
collectives need every rank in every forward/backward. Old log-probs are computed on every rank
for every row (the same passes everywhere; correct, not yet split). Gradient clipping and the
optimizer step run on the sharded (DTensor) parameters.

The KL term (``use_kl_loss`` with ``kl_loss_coef`` > 0): every rank holds its own frozen,
unsharded reference model (``reference_model``, loaded from the base model) and computes the
reference log-probs of every row, like the old log-probs; the KL part of each rank's loss then
sums as the policy-gradient part does. Not yet supported (refused when asked): LoRA
(``lora_rank`` > 0). ``rltune train`` with ``n_gpus_training`` > 1 launches the ranks itself
(``trainer/parallel/ranks.py``); ``torchrun`` works too.

Checkpoints hold full (unsharded) tensors in the one-process format (``state_dict``), so a job
saved on N ranks resumes on any number of ranks, one included.

Example (one script, ``torchrun --standalone --nproc-per-node 2 script.py``):
    dp = init_data_parallel()
    model = shard_policy(tiny_qwen2(seed=0), dp)           # before the optimizer is built
    updater = DataParallelUpdater(model, hp, knobs, total_steps=10, dp=dp)
    metrics = updater.update(rows)                           # the same rows on every rank
    state = full_state_dict(model)                           # rank 0: full tensors
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.distributed as dist

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.sdk.errors import ConfigError
from rltune.trainer.update import PolicyUpdater, TrainingRow

#: Metrics of a mini-batch that are sums of per-row shares (each rank holds part of them).
_ADDITIVE = ("actor/pg_loss", "actor/kl_loss", "actor/entropy", "actor/pg_clipfrac",
             "actor/ppo_kl")


@dataclass
class DataParallel:
    """This process's place in the group: rank, world size, device and the 1-D device mesh."""

    rank: int
    world_size: int
    device: torch.device
    mesh: Any

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_data_parallel(device: Optional[str] = None, *, store: Any = None,
                       rank: Optional[int] = None, world_size: Optional[int] = None,
                       cuda_index: Optional[int] = None) -> DataParallel:
    """Join the process group: NCCL on CUDA, gloo on the CPU. Without ``store`` the group is
    the one ``torchrun`` describes (environment); with a ``torch.distributed.Store`` it is
    ``rank`` of ``world_size`` (``trainer/parallel/ranks.py``). ``cuda_index``: this rank's GPU."""
    from torch.distributed.device_mesh import init_device_mesh

    kind = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not dist.is_initialized():
        backend = "nccl" if kind == "cuda" else "gloo"
        if store is None:
            dist.init_process_group(backend)
        else:
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    rank, world = dist.get_rank(), dist.get_world_size()
    if kind == "cuda":
        local = cuda_index if cuda_index is not None else int(
            os.environ.get("LOCAL_RANK", rank % max(1, torch.cuda.device_count())))
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    return DataParallel(rank, world, dev, init_device_mesh(kind, (world,)))


def shard_policy(model: torch.nn.Module, dp: DataParallel) -> torch.nn.Module:
    """Shard ``model`` with FSDP2: each decoder layer, then the rest (embeddings, head).

    Gradients are summed across ranks, not averaged: a rank's loss is its share of the one
    global loss (see the module doc).
    """
    from torch.distributed.fsdp import FSDPModule, fully_shard

    model.to(dp.device)
    layers = getattr(getattr(model, "model", None), "layers", None) or []
    for layer in layers:
        fully_shard(layer, mesh=dp.mesh)
    # The root reshards after forward too: a no-grad forward (old log-probs) would otherwise
    # leave its unsharded weights registered, and clipping would see those, not the shards.
    fully_shard(model, mesh=dp.mesh, reshard_after_forward=True)
    for module in model.modules():  # the settings are per FSDP module, not inherited
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)  # plain SUM: gloo has no PREMUL_SUM
    return model


class _Pad(list[Any]):
    """A pass that only keeps this rank in step with the others (its loss is multiplied by 0)."""

    dummy = True


class DataParallelUpdater(PolicyUpdater):
    """``PolicyUpdater`` on an FSDP2-sharded model: each rank runs its share of the rows."""

    def __init__(self, model: torch.nn.Module, hp: HyperParameters, knobs: AlgorithmKnobs, *,
                 total_steps: int, dp: DataParallel, pad_token_id: int = 0,
                 reference_model: Optional[torch.nn.Module] = None):
        if knobs.use_kl_loss and knobs.kl_loss_coef > 0 and reference_model is None:
            # a copy of the sharded policy would hold shards, not the reference's weights
            raise ValueError("the KL term on data-parallel ranks needs reference_model: the "
                             "frozen base model, unsharded, on every rank")
        if hp.lora_rank:
            raise ConfigError("data-parallel training does not support LoRA yet",
                              where="training.hyper_parameters.lora_rank",
                              hint="set lora_rank: 0 to train on several ranks")
        self.dp = dp
        super().__init__(model, hp, knobs, total_steps=total_steps, pad_token_id=pad_token_id,
                         reference_model=reference_model)

    def _run_chunks(self, run: list[int]) -> list[list[int]]:
        world = self.dp.world_size
        counts = [len(self._chunks(run[r::world])) for r in range(world)]
        mine: list[list[int]] = self._chunks(run[self.dp.rank::world])
        return mine + [_Pad(run[:1]) for _ in range(max(counts) - len(mine))]

    def _mini_batch(self, rows: Sequence[TrainingRow], idx: list[int], ref: Any,
                    index_of: dict[str, int], active: list[bool]) -> dict[str, float]:
        out = super()._mini_batch(rows, idx, ref, index_of, active)
        shares = torch.tensor([out[k] for k in _ADDITIVE], dtype=torch.float64,
                              device=self.dp.device)
        dist.all_reduce(shares)
        out.update(zip(_ADDITIVE, shares.tolist(), strict=True))
        return out


    # ---- state (every rank must call these: they gather or scatter the shards) ----
    def state_dict(self) -> dict[str, Any]:
        """The full optimizer state in ``PolicyUpdater``'s format (CPU tensors; rank 0 only,
        empty elsewhere), the schedule and the step: what a one-process job would save."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
        )

        full = get_optimizer_state_dict(
            self.model, self.optimizer,
            options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        index = {name: i for i, name in enumerate(self._param_names())}
        optim = {"state": {index[k]: v for k, v in full.get("state", {}).items()},
                 "param_groups": [{**g, "params": [index[k] for k in g["params"]]}
                                  for g in full.get("param_groups", [])]}
        return {"optimizer": optim, "scheduler": self.scheduler.state_dict(),
                "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict`` (saved on any number of ranks, or by one process)."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_optimizer_state_dict,
        )

        names = self._param_names()
        optim = state["optimizer"]
        full = {"state": {names[int(i)]: v for i, v in optim["state"].items()},
                "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]}
                                 for g in optim["param_groups"]]}
        set_optimizer_state_dict(self.model, self.optimizer, full,
                                 options=StateDictOptions(full_state_dict=True))
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])

    def _param_names(self) -> list[str]:
        """Parameter names in the optimizer's order (``optimizer.state_dict()``'s indices)."""
        name_of = {id(p): n for n, p in self.model.named_parameters()}
        return [name_of[id(p)] for g in self.optimizer.param_groups for p in g["params"]]

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Load full weights (the same on every rank); each rank keeps its shards."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
        )

        set_model_state_dict(self.model, weights, options=StateDictOptions(full_state_dict=True))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the full weights and ``state_dict`` to ``path`` from rank 0."""
        weights = full_state_dict(self.model)
        state = self.state_dict()
        if self.dp.is_main:
            torch.save({"model": weights, **state, "world_size": self.dp.world_size}, path)
        dist.barrier()

    def load(self, path: str | os.PathLike[str]) -> None:
        """Continue from ``save``'s file: every rank reads it and keeps its shards."""
        state = torch.load(path, map_location="cpu", weights_only=False)
        self.load_weights(state["model"])
        self.load_state_dict(state)


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's weights on rank 0 (CPU tensors); ``{}`` elsewhere. Every rank must
    call it (it gathers the shards)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    weights: dict[str, torch.Tensor] = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return weights
