"""PPO's critic: a value model and its updates (``algorithm: ppo``).

**The value model is a separate critic**, as in verl: a copy of the policy's decoder (its
weights at the job's start, so the critic begins with the policy's features) with a scalar head
(zero-initialised: every value starts at 0). A value head on the policy's own trunk would save
one forward pass, but the value loss would then move the policy's weights (and the weights the
engine samples with) with every critic step, warm-up could not leave the policy frozen, and the
two losses would need a weighting knob; the nano model is small enough that the second forward
pass costs little on a CPU. A LoRA policy's critic copies the decoder with its adapters and
trains all of it.

``values_BT[b, t]`` is the value of the state before token ``t`` (the hidden state at ``t-1``),
aligned with ``token_logprobs_BT``; position 0 is 0.

``Critic.update`` fits the values to GAE's returns with the clipped value loss
(``losses.value_loss_BT``), token-mean over each mini-batch, in the policy's mini-batches and
``ppo_epochs``, with AdamW at ``critic_lr`` and ``max_grad_norm``. Its ``state_dict`` (weights,
optimizer, updates done) is saved in every checkpoint as ``critic.pt`` and restored on resume.

Example:
    >>> from rltune.config import HyperParameters, resolve_algorithm
    >>> from rltune.trainer.testing import tiny_qwen2
    >>> hp = HyperParameters(algorithm="ppo", learning_rate=1e-3, n_rollouts=2)
    >>> critic = Critic(ValueModel.from_policy(tiny_qwen2()), hp, resolve_algorithm(hp))
    >>> critic.values([[1, 2, 3]])
    [[0.0, 0.0, 0.0]]
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import torch

from rltune.config.algorithm import AlgorithmKnobs
from rltune.config.hyperparams import HyperParameters
from rltune.trainer.logprobs import _split_head, pad_rows
from rltune.trainer.losses import value_loss_BT
from rltune.trainer.signals.gae import explained_variance


class ValueModel(torch.nn.Module):
    """A decoder trunk and a scalar head: one value per token position."""

    def __init__(self, trunk: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.trunk = trunk
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: torch.nn.Module) -> ValueModel:
        """A critic initialised from ``policy``'s decoder weights, on its device."""
        parts = _split_head(policy)
        if parts is None:
            raise ValueError("PPO's critic needs a causal LM with a plain output head "
                             f"({type(policy).__name__} has none)")
        trunk = copy.deepcopy(parts[0])
        for p in trunk.parameters():
            p.requires_grad_(True)
        hidden = int(trunk.config.hidden_size)
        device = next(policy.parameters()).device
        model: ValueModel = cls(trunk, hidden).to(device)
        return model

    def forward(self, input_ids_BT: torch.Tensor, attention_mask_BT: torch.Tensor
                ) -> torch.Tensor:
        hidden_BTH = self.trunk(input_ids=input_ids_BT,
                                attention_mask=attention_mask_BT).last_hidden_state
        after_BT = self.head(hidden_BTH.float()).squeeze(-1)  # the state after token t
        return torch.cat([torch.zeros_like(after_BT[:, :1]), after_BT[:, :-1]], dim=1)


class Critic:
    """The value model, its optimizer, and the number of updates done (for warm-up)."""

    def __init__(self, model: ValueModel, hp: HyperParameters, knobs: AlgorithmKnobs, *,
                 pad_token_id: int = 0):
        self.model, self.hp, self.knobs = model, hp, knobs
        self.pad_token_id = pad_token_id
        self.lr = knobs.critic_lr if knobs.critic_lr is not None else hp.learning_rate
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=self.lr,
            weight_decay=hp.weight_decay)
        self.steps = 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _chunks(self, n: int) -> list[list[int]]:
        size = self.hp.micro_batch_size or n or 1
        return [list(range(i, min(n, i + size))) for i in range(0, n, size)]

    def _forward(self, ids_rows: Sequence[Sequence[int]]) -> torch.Tensor:
        ids, attn = pad_rows(ids_rows, pad_id=self.pad_token_id)
        return self.model(ids.to(self.device), attn.to(self.device))

    @torch.no_grad()
    def values(self, ids_rows: Sequence[Sequence[int]]) -> list[list[float]]:
        """The value at every position of each row (eval mode, no gradient)."""
        was_training = self.model.training
        self.model.eval()
        out: list[list[float]] = []
        try:
            for chunk in self._chunks(len(ids_rows)):
                values_BT = self._forward([ids_rows[i] for i in chunk]).float().cpu()
                out.extend(values_BT[j, : len(ids_rows[i])].tolist()
                           for j, i in enumerate(chunk))
        finally:
            self.model.train(was_training)
        return out

    def update(self, ids_rows: Sequence[Sequence[int]], masks: Sequence[Sequence[int]],
               returns: Sequence[Sequence[float]], old_values: Sequence[Sequence[float]],
               groups: Sequence[Sequence[int]]) -> dict[str, float]:
        """Fit the values to ``returns`` on the masked tokens; ``groups`` are the row indices
        of each mini-batch. Returns the ``critic/*`` metrics of the step."""
        sums: dict[str, list[float]] = {"loss": [], "clip": [], "vpred": [], "norm": []}
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.model.train()
        for _ in range(self.knobs.ppo_epochs):
            for group in groups:
                self.optimizer.zero_grad(set_to_none=True)
                tokens = float(max(1, sum(sum(masks[i]) for i in group)))
                loss_sum = clip_sum = vpred_sum = 0.0
                for part in self._chunks(len(group)):
                    idx = [group[j] for j in part]
                    values_BT = self._forward([ids_rows[i] for i in idx])
                    mask_BT = _pad([masks[i] for i in idx]).to(values_BT.device)
                    loss_BT, clipped_BT = value_loss_BT(
                        values_BT, _pad([old_values[i] for i in idx]).to(values_BT.device),
                        _pad([returns[i] for i in idx]).to(values_BT.device), self.knobs.vf_clip)
                    loss = (loss_BT * mask_BT).sum() / tokens
                    loss.backward()
                    loss_sum += float(loss.detach())
                    clip_sum += float((clipped_BT.float() * mask_BT).sum()) / tokens
                    vpred_sum += float((values_BT.detach() * mask_BT).sum()) / tokens
                norm = float(torch.nn.utils.clip_grad_norm_(params, self.hp.max_grad_norm))
                if math.isfinite(norm):
                    self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                for key, value in (("loss", loss_sum), ("clip", clip_sum), ("vpred", vpred_sum),
                                   ("norm", norm)):
                    sums[key].append(value)
        self.steps += 1
        mask_N = torch.cat([torch.tensor(m, dtype=torch.bool) for m in masks])
        old_N = torch.cat([torch.tensor(v) for v in old_values])[mask_N]
        ret_N = torch.cat([torch.tensor(r) for r in returns])[mask_N]
        norms = [n for n in sums["norm"] if math.isfinite(n)]
        return {
            "critic/vf_loss": _mean(sums["loss"]),
            "critic/vf_clipfrac": _mean(sums["clip"]),
            "critic/vpred_mean": _mean(sums["vpred"]),
            "critic/grad_norm": _mean(norms) if norms else float("nan"),
            "critic/vf_explained_var": explained_variance(old_N, ret_N),
            "critic/values/mean": float(old_N.mean()) if old_N.numel() else 0.0,
            "critic/returns/mean": float(ret_N.mean()) if ret_N.numel() else 0.0,
            "critic/lr": self.lr,
        }

    # ---- state for checkpoints ----
    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])


def _pad(rows: Sequence[Sequence[float]]) -> torch.Tensor:
    return pad_rows(rows, dtype=torch.float32)[0]


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0

