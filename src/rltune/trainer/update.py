"""The policy-update half of a training step: rows in, ``actor/*`` metrics out.

``PolicyUpdater.update(rows)`` recomputes old log-probs (unless given), computes reference
log-probs for the KL term, splits the rollouts into ``ppo_mini_batch_size`` mini-batches, runs
the preset's loss with AdamW and gradient clipping, and steps the LR schedule once.

Example (a throwaway model; see tests/trainer/test_update.py for more):
    >>> from rltune.config import HyperParameters, resolve_algorithm
    >>> from rltune.trainer.testing import tiny_qwen2
    >>> model = tiny_qwen2()
    >>> hp = HyperParameters(algorithm="grpo", learning_rate=1e-3, n_rollouts=2)
    >>> up = PolicyUpdater(model, hp, resolve_algorithm(hp), total_steps=10)
    >>> rows = [TrainingRow([1, 2, 3], [0, 1, 1], 1.0, "a"),
    ...         TrainingRow([1, 2, 4], [0, 1, 1], -1.0, "b")]
    >>> m = up.update(rows)
    >>> sorted(k for k in m if k.startswith("actor/"))[:3]
    ['actor/entropy', 'actor/grad_norm', 'actor/kl_loss']
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.trainer.device import on_device
from rltune.trainer.logprobs import chunk_positions, pad_rows, token_logprobs_BT
from rltune.trainer.lora import adapters_disabled, is_lora
from rltune.trainer.losses import (
    BEHAVIOUR_LOG_RATIO_BOUND,
    agg_normalizer,
    aggregate_loss,
    behaviour_keep_BT,
    behaviour_weight_BT,
    importance_ratio_BT,
    kl_penalty_BT,
    ppo_clip_loss_BT,
)
from rltune.trainer.optim import build_optimizer, build_scheduler
from rltune.trainer.signals.advantages import rollout_weights_B


@dataclass
class TrainingRow:
    """One training sequence. Per-token lists are aligned with ``input_ids`` (entry ``t`` is
    about token ``t``); ``loss_mask`` is 1 on sampled tokens. ``advantage`` holds one value
    per token; a single number (a GRPO rollout's advantage) is spread over every token. Pure
    data: the row names its rollout by id and holds no reference to it (``trainer/rows.py``)."""

    input_ids: list[int]
    loss_mask: list[int]
    advantage: list[float]
    rollout_id: str
    old_logprobs: Optional[list[float]] = None
    rollout_logprobs: Optional[list[float]] = None  # the engine's sampling log-probs
    context: int = 0  # which of the rollout's contexts (``RolloutResult.sequences``) it is
    #: weight versions between the policy this row trains and its sampled tokens (their mean;
    #: 0 = sampled by the current weights), set by the step (``staleness.stamp_staleness``)
    staleness: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        if not isinstance(self.advantage, list):
            self.advantage = [float(self.advantage)] * n
        if n < 2 or len(self.loss_mask) != n:
            raise ValueError(
                f"row of rollout {self.rollout_id}: input_ids ({n}) and loss_mask "
                f"({len(self.loss_mask)}) must have the same length >= 2"
            )
        if self.loss_mask[0]:
            raise ValueError(f"row of rollout {self.rollout_id}: loss_mask[0] must be 0 "
                             "(the first token has no context to be sampled from)")
        for name in ("advantage", "old_logprobs", "rollout_logprobs"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"row of rollout {self.rollout_id}: {name} has {len(values)} "
                                 f"entries for {n} tokens")


def staleness_lr_scale(rows: Sequence[TrainingRow]) -> float:
    """``1 / (1 + s)`` with ``s`` the mean staleness of the rows' sampled tokens: the
    learning-rate factor of an update on stale rows (``scale_lr_by_staleness``).

    A gradient from rollouts ``s`` versions old pushes towards what the sampling policy
    lacked, some of which the policy has already taken; stepping a full rate on it overshoots.
    Dividing the rate by the delay is the rule of staleness-aware asynchronous SGD (a delayed
    gradient is stable at a rate ~1/delay). Fresh rows (s = 0) keep the full rate.

    >>> rows = [TrainingRow([1, 2, 3], [0, 1, 1], 1.0, "a", staleness=2.0),
    ...         TrainingRow([1, 2], [0, 1], 1.0, "b")]
    >>> round(staleness_lr_scale(rows), 4)   # (2 * 2 + 0 * 1) / 3 tokens = 4/3 versions
    0.4286
    """
    tokens = sum(sum(r.loss_mask) for r in rows)
    if not tokens:
        return 1.0
    mean = sum(r.staleness * sum(r.loss_mask) for r in rows) / tokens
    return 1.0 / (1.0 + mean)


def mini_batches(rows: Sequence[TrainingRow], rollouts_per_mini_batch: int) -> list[list[int]]:
    """The positions in ``rows`` of each mini-batch of a step: the rows' rollouts in the order
    they first appear, ``rollouts_per_mini_batch`` rollouts to a mini-batch (the hyper-parameter
    ``mini_batch_rollouts``), every row of a rollout in its rollout's mini-batch. The policy's
    update and PPO's critic split a step alike.

    >>> rows = [TrainingRow([1, 2], [0, 1], 0.0, rid) for rid in ("a", "a", "b", "c", "b")]
    >>> mini_batches(rows, 2)
    [[0, 1, 2, 4], [3]]
    >>> mini_batches(rows, 8)
    [[0, 1, 2, 3, 4]]
    """
    if rollouts_per_mini_batch < 1:
        raise ValueError(f"rollouts_per_mini_batch must be >= 1, not {rollouts_per_mini_batch}")
    index_of: dict[str, int] = {}
    groups: list[list[int]] = []
    for i, row in enumerate(rows):
        rollout = index_of.setdefault(row.rollout_id, len(index_of))
        if rollout // rollouts_per_mini_batch == len(groups):
            groups.append([])
        groups[rollout // rollouts_per_mini_batch].append(i)
    return groups


@dataclass
class _Batch:
    ids: torch.Tensor
    attn: torch.Tensor
    mask: torch.Tensor
    adv: torch.Tensor
    old: torch.Tensor
    ref: Optional[torch.Tensor]
    weight: torch.Tensor
    behav: Optional[torch.Tensor] = None  # the engine's log-probs (off-policy correction)


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A frozen reference copy (for the KL term when training all weights)."""
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


class PolicyUpdater:
    """Owns the model's optimizer and LR schedule; ``update(rows)`` is one training step.

    ``reference_model``: the frozen base model for the KL term. If None and the KL term is on,
    a frozen copy of ``model`` is made now — correct at job start; on resume pass the *base*
    model, not the checkpoint. A LoRA ``model`` (``trainer/lora.py``) is its own reference:
    its reference log-probs come from the same model with the adapters disabled.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        hp: HyperParameters,
        knobs: AlgorithmKnobs,
        *,
        total_steps: int,
        reference_model: Optional[torch.nn.Module] = None,
        pad_token_id: int = 0,
    ):
        self.model, self.hp, self.knobs = model, hp, knobs
        self.pad_token_id = pad_token_id
        self.use_kl = knobs.use_kl_loss and knobs.kl_loss_coef > 0
        self.lora = is_lora(model)
        if self.lora and reference_model is not None:
            raise ValueError("a LoRA policy is its own KL reference (adapters disabled); "
                             "pass no reference_model")
        self.reference = reference_model if reference_model is not None or not self.use_kl \
            or self.lora else frozen_copy(model)
        self.optimizer = build_optimizer(model, hp)
        self.scheduler = build_scheduler(self.optimizer, hp, total_steps)
        self.total_steps = total_steps
        self.step = 0
        # Rows whose advantage is 0 on every token add nothing to the gradient of a loss
        # without KL or entropy terms; they still count in the normaliser, so only their
        # forward/backward passes are skipped (~half the rows of a typical GRPO step).
        self.skip_inert_rows = True
        # max_staleness >= 1: rollouts may come from older weights; the loss is decoupled PPO
        # (``losses.ppo_clip_loss_BT`` with a behaviour weight) with the engine's recorded
        # log-probs as behaviour.
        self.off_policy = hp.max_staleness > 0
        # ... and a sampled token whose prox / behaviour log-ratio exceeds this bound leaves
        # the loss (``losses.behaviour_keep_BT``); inf turns the mask off.
        self.behaviour_bound = BEHAVIOUR_LOG_RATIO_BOUND

    # ---- log-probs ----
    def _collate(self, rows: Sequence[TrainingRow], key: str) -> torch.Tensor:
        # A skipped row has no old log-probs; its zeros are never read.
        values, _ = pad_rows([getattr(r, key) or [0.0] * len(r.input_ids) for r in rows],
                             dtype=torch.float32)
        return values

    def _active(self, rows: Sequence[TrainingRow]) -> list[bool]:
        """Which rows need a forward/backward pass (see ``skip_inert_rows``)."""
        k = self.knobs
        if not self.skip_inert_rows or self.use_kl or k.entropy_coeff:
            return [True] * len(rows)
        return [any(a != 0 for a in r.advantage) for r in rows]

    @torch.no_grad()
    def compute_logprobs(
        self, rows: Sequence[TrainingRow], model: Optional[torch.nn.Module] = None
    ) -> list[list[float]]:
        """Log-probs of every row under ``model`` (default: the policy), in eval mode."""
        model = model or self.model
        was_training = model.training
        model.eval()
        out: list[list[float]] = []
        try:
            for chunk in self._chunks(list(range(len(rows)))):
                ids, attn = pad_rows([rows[i].input_ids for i in chunk], pad_id=self.pad_token_id)
                logp, _ = token_logprobs_BT(model, ids, attn, temperature=self.hp.temperature,
                                            bf16=self.hp.bf16,
                                            chunk_tokens=self._chunk(model))
                for j, i in enumerate(chunk):
                    out.append(logp[j, : len(rows[i].input_ids)].tolist())
        finally:
            model.train(was_training)
        return out

    def reference_logprobs(self, rows: Sequence[TrainingRow]) -> list[list[float]]:
        """Log-probs under the KL reference: the frozen copy, or the LoRA policy with its
        adapters disabled (the base weights never train, so that is the base model)."""
        if self.lora:
            with adapters_disabled(self.model):
                logprobs: list[list[float]] = self.compute_logprobs(rows)
            return logprobs
        if self.reference is None:
            raise ValueError("no reference model: the KL term is off for this updater")
        with on_device(self.reference, _device_of(self.model)):
            logprobs = self.compute_logprobs(rows, self.reference)
        return logprobs

    def _chunk(self, model: torch.nn.Module) -> int:
        """Positions per output-head chunk within the ``logprob_chunk_mib`` budget."""
        return chunk_positions(model, self.hp.logprob_chunk_mib)

    def _chunks(self, indices: list[int]) -> list[list[int]]:
        size = self.hp.micro_batch_size or len(indices) or 1
        return [indices[i : i + size] for i in range(0, len(indices), size)]

    def _run_chunks(self, run: list[int]) -> list[list[int]]:
        """The forward/backward passes of a mini-batch (positions in it); a data-parallel
        updater (``rltune.trainer.parallel.distributed``) runs only its rank's share."""
        return self._chunks(run)

    # ---- the update ----
    def update(self, rows: Sequence[TrainingRow]) -> dict[str, float]:
        """Run the mini-batch updates of one training step and return its metrics."""
        if not rows:
            raise ValueError("update() needs at least one row")
        t0 = time.perf_counter()
        rows = [dataclasses.replace(r) for r in rows]  # filled below; callers' rows untouched
        active = self._active(rows)
        missing = [r for r, a in zip(rows, active, strict=True) if a and r.old_logprobs is None]
        if missing:
            # Old log-probs are recomputed by the trainer, never taken from the engine; the engine's
            # sampling log-probs feed the mismatch metric and, with max_staleness >= 1, the
            # behaviour weight of the off-policy correction.
            for r, lp in zip(missing, self.compute_logprobs(missing), strict=True):
                r.old_logprobs = lp
        ref = self.reference_logprobs(rows) if self.use_kl else None

        index_of = {rid: i for i, rid in enumerate(dict.fromkeys(r.rollout_id for r in rows))}
        groups = mini_batches(rows, self.hp.mini_batch_rollouts)
        # a smaller step for stale rows (``staleness_lr_scale``); the scheduler's step() below
        # sets every group's rate from the schedule again
        scale = staleness_lr_scale(rows) if self.hp.scale_lr_by_staleness else 1.0
        for group in self.optimizer.param_groups:
            group["lr"] *= scale

        metrics: dict[str, list[float]] = {}
        self.model.train()
        for _ in range(self.knobs.ppo_epochs):
            for idx in groups:
                mb = self._mini_batch(rows, idx, ref, index_of, active)
                for key, value in mb.items():
                    metrics.setdefault(key, []).append(value)
        lr = self.optimizer.param_groups[0]["lr"]
        self.scheduler.step()
        self.step += 1

        out = {k: float(sum(v) / len(v)) for k, v in metrics.items() if k != "actor/grad_norm"}
        norms = [g for g in metrics.get("actor/grad_norm", []) if math.isfinite(g)]
        out["actor/grad_norm"] = float(sum(norms) / len(norms)) if norms else float("nan")
        out["actor/lr"] = lr
        if self.off_policy:
            out["fully_async/lr_scale"] = scale
        out["actor/num_mini_batches"] = float(len(groups) * self.knobs.ppo_epochs)
        adv = [a for r in rows for a, m in zip(r.advantage, r.loss_mask, strict=True) if m]
        adv = adv or [0.0]
        out["critic/advantages/mean"] = sum(adv) / len(adv)
        out["critic/advantages/max"] = max(adv)
        out["critic/advantages/min"] = min(adv)
        mismatch = self._mismatch(rows)
        if mismatch is not None:
            out["training/rollout_probs_diff_mean"] = mismatch
        out["timing/s/update"] = time.perf_counter() - t0
        return out

    async def aupdate(self, rows: Sequence[TrainingRow]) -> dict[str, float]:
        """``update`` in a worker thread, so the event loop keeps serving rollouts."""
        return await asyncio.to_thread(self.update, rows)

    def _tensors(self, rows: Sequence[TrainingRow], idx: list[int], ref: Any,
                 index_of: dict[str, int]) -> _Batch:
        sub = [rows[i] for i in idx]
        ids, attn = pad_rows([r.input_ids for r in sub], pad_id=self.pad_token_id)
        mask = self._collate(sub, "loss_mask")
        adv = pad_rows([r.advantage for r in sub], dtype=torch.float32)[0]
        old = self._collate(sub, "old_logprobs")
        ref_t = pad_rows([ref[i] for i in idx], dtype=torch.float32)[0] if ref else None
        weight = rollout_weights_B(torch.tensor([index_of[r.rollout_id] for r in sub]))
        behav = None
        if self.off_policy:  # a row without recorded log-probs counts as on-policy (w = 1)
            behav = pad_rows([r.rollout_logprobs or r.old_logprobs or [0.0] * len(r.input_ids)
                              for r in sub], dtype=torch.float32)[0]
        return _Batch(ids, attn, mask, adv, old, ref_t, weight, behav)

    def _mini_batch(self, rows: Sequence[TrainingRow], idx: list[int], ref: Any,
                    index_of: dict[str, int], active: list[bool]) -> dict[str, float]:
        k = self.knobs
        full = self._tensors(rows, idx, ref, index_of)
        mode = k.loss_agg_mode
        norm = agg_normalizer(full.mask, mode, full.weight)  # every row counts here
        run = [i for i in range(len(idx)) if active[idx[i]]]
        # entropy / clip / ppo_kl are averaged over the tokens that were run
        run_mask = full.mask[run] if run else full.mask
        tokens = float(run_mask.sum().clamp(min=1))
        sums = {"pg": 0.0, "kl": 0.0, "ent": 0.0, "clip": 0.0, "ppo_kl": 0.0,
                "bw": 0.0, "bw_capped": 0.0, "bw_masked": 0.0, "behav_kl": 0.0}
        self.optimizer.zero_grad(set_to_none=True)
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not run:  # the same zero gradient a pass over these rows would leave (Adam moves)
            for p in params:
                p.grad = torch.zeros_like(p)
        for chunk in self._run_chunks(run):
            b = self._tensors(rows, [idx[i] for i in chunk], ref, index_of)
            logp, entropy = token_logprobs_BT(
                self.model, b.ids, b.attn, temperature=self.hp.temperature, bf16=self.hp.bf16,
                with_entropy=True, chunk_tokens=self._chunk(self.model),
            )
            mask = b.mask.to(logp.device)
            old = b.old.to(logp.device)
            adv = b.adv.to(logp.device)
            bw, loss_mask = None, mask
            seen: dict[str, float] = {}  # this pass's share of the metrics (none for a pad)
            if b.behav is not None:
                behav = b.behav.to(logp.device)
                # tokens the policy moved too far from since they were sampled leave the loss
                loss_mask = behaviour_keep_BT(old, behav, mask, self.behaviour_bound)
                bw, capped = behaviour_weight_BT(old, behav, loss_mask,
                                                 k.importance_sampling_level)
                seen["bw"] = float((bw * loss_mask).sum()) / tokens
                seen["bw_capped"] = float((capped.float() * loss_mask).sum()) / tokens
                seen["bw_masked"] = float((mask - loss_mask).sum()) / tokens
                # KL(behaviour || prox), k1 from the behaviour policy's own samples
                seen["behav_kl"] = float(((behav - old) * mask).sum()) / tokens
            ratio = importance_ratio_BT(logp, old, loss_mask, k.importance_sampling_level)
            pg_BT, clipped_BT = ppo_clip_loss_BT(ratio, adv, k.clip_ratio_low, k.clip_ratio_high,
                                                 k.clip_ratio_c, behaviour_weight_BT=bw)
            weight = b.weight.to(logp.device)
            pg = aggregate_loss(pg_BT, loss_mask, mode, row_weight_B=weight, normalizer=norm)
            loss = pg
            if self.use_kl and b.ref is not None:
                kl = aggregate_loss(kl_penalty_BT(logp, b.ref.to(logp.device), k.kl_estimator),
                                    loss_mask, mode, row_weight_B=weight, normalizer=norm)
                loss = loss + k.kl_loss_coef * kl
                seen["kl"] = float(kl.detach())
            if k.entropy_coeff:
                ent_term = aggregate_loss(entropy, loss_mask, mode, row_weight_B=weight,
                                          normalizer=norm)
                loss = loss - k.entropy_coeff * ent_term
            if getattr(chunk, "dummy", False):  # a pass that only keeps ranks in step
                (loss * 0.0).backward()
                continue
            loss.backward()
            for key, value in seen.items():
                sums[key] += value
            sums["pg"] += float(pg.detach())
            sums["ent"] += float((entropy * mask).sum()) / tokens
            sums["clip"] += float((clipped_BT.float() * mask).sum()) / tokens
            sums["ppo_kl"] += float(((b.old.to(logp.device) - logp.detach()) * mask).sum()) \
                / tokens
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.hp.max_grad_norm))
        if math.isfinite(grad_norm):
            self.optimizer.step()
        else:
            # A non-finite gradient would poison the weights and Adam's moments: skip it.
            self.optimizer.zero_grad(set_to_none=True)
        out = {
            "actor/pg_loss": sums["pg"],
            "actor/kl_loss": sums["kl"],
            "actor/entropy": sums["ent"],
            "actor/pg_clipfrac": sums["clip"],
            "actor/ppo_kl": sums["ppo_kl"],
            "actor/grad_norm": grad_norm,
            "actor/skipped_updates": 0.0 if math.isfinite(grad_norm) else 1.0,
        }
        if self.off_policy and run:
            out["fully_async/behaviour_weight/mean"] = sums["bw"]
            out["fully_async/behaviour_weight/capped_frac"] = sums["bw_capped"]
            out["fully_async/behaviour_weight/masked_frac"] = sums["bw_masked"]
            out["fully_async/behaviour_kl"] = sums["behav_kl"]
        return out

    def _mismatch(self, rows: Sequence[TrainingRow]) -> Optional[float]:
        have = [r for r in rows if r.rollout_logprobs is not None and r.old_logprobs is not None]
        if not have:
            return None
        diffs = torch.cat([
            (torch.tensor(r.old_logprobs).exp() - torch.tensor(r.rollout_logprobs).exp()).abs()
            [torch.tensor(r.loss_mask, dtype=torch.bool)] for r in have
        ])
        return float(diffs.mean()) if diffs.numel() else None

    # ---- state for checkpoints ----
    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "step": self.step}

    def schedule_state(self) -> dict[str, Any]:
        """The LR schedule and the step: what a sharded checkpoint keeps besides its shards."""
        return {"scheduler": self.scheduler.state_dict(), "step": self.step}

    def load_schedule_state(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])

    def save_sharded(self, path: str | Path) -> None:
        """Write the weights and optimizer state as DCP shards (``trainer/parallel/sharded.py``)."""
        from rltune.trainer.parallel.sharded import save_sharded

        save_sharded(self.model, self.optimizer, path)

    def load_sharded(self, path: str | Path) -> None:
        """Load ``save_sharded``'s shards, written on any number of ranks."""
        from rltune.trainer.parallel.sharded import load_sharded

        load_sharded(self.model, self.optimizer, path)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])

    # ---- weights (the ``Updater`` protocol; one process holds them all) ----
    def full_weights(self) -> Any:
        """What the engine loads after an update: the merged weights of a LoRA policy, else
        the policy itself (``lora.engine_weights``)."""
        from rltune.trainer.lora import engine_weights

        return engine_weights(self.model)

    async def afull_weights(self) -> Any:
        return self.full_weights()

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(weights)

    async def close(self) -> None:
        """Nothing to stop: the policy lives in this process."""


