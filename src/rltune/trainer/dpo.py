"""Direct preference optimisation (``algorithm: dpo``; Ark's DPO / DPOLoRA).

A DPO job reads preference rows: a prompt (``messages`` or TRL's ``prompt``) with a ``chosen``
and a ``rejected`` response, each a string (one assistant message), one message, or a list of
messages (tool calls and tool results included). Any other column is kept as in every dataset
(``rltune.config.compat.rowshapes``), so ``chosen`` / ``rejected`` arrive in the row's
``rollout_extra``. Each response is rendered after its prompt with the job's chat template;
its assistant tokens (tool calls and ``<|im_end|>`` included, tool results not) are the ones
whose log-probs count, summed over the response.

The loss is ``losses.dpo_loss_B`` on the policy's and the frozen reference's sequence
log-probs. The reference is the job's starting model: a frozen copy for full fine-tuning (the
runtime loads it, ``trainer/policy.py``), the policy with its adapters disabled under LoRA. Its
log-probs are computed once per row and kept. ``DpoSteps`` stands in for the step runner and
scheduler inside the same ``Trainer`` as an SFT job (``trainer/sft.py``): checkpoints, resume,
publishing and the console are those of every job; ``model: <published DPO model>`` starts an
RL job from it.

Example:
    >>> from rltune.config.data import DataRow
    >>> row = DataRow(messages=[{"role": "user", "content": "2+3?"}],
    ...               rollout_extra={"chosen": "5", "rejected": [
    ...                   {"role": "assistant", "content": "6"}]})
    >>> chosen, rejected = preference_pair(row, "training", 0)
    >>> chosen, rejected
    ([{'role': 'assistant', 'content': '5'}], [{'role': 'assistant', 'content': '6'}])
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Optional

import pydantic
import torch

from rltune.config.data import DataRow, EpochSampler, Message
from rltune.sdk.errors import DatasetError
from rltune.trainer.device import on_device
from rltune.trainer.logprobs import pad_rows, token_logprobs_BT
from rltune.trainer.lora import adapters_disabled, is_lora
from rltune.trainer.losses import dpo_loss_B
from rltune.trainer.sft import encode_messages
from rltune.trainer.step import StepResult

#: The row columns of a preference pair.
PAIR_KEYS = ("chosen", "rejected")

Encoded = tuple[list[int], list[int]]  # token ids, loss mask


def _fail(what: str, line: int, problem: str, hint: str) -> DatasetError:
    return DatasetError(f"{what} row {line}: {problem}", where=f"{what} dataset, line {line}",
                        hint=hint)


def preference_pair(row: DataRow, what: str, n: int
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chosen and the rejected response of a preference row, as message lists."""
    line = row.line or n + 1
    columns = {**(row.rollout_extra or {}), **(row.model_extra or {})}
    out = []
    for key in PAIR_KEYS:
        value = columns.get(key)
        if value is None:
            raise _fail(what, line, f"has no '{key}' response: a DPO row is a prompt with a "
                        "chosen and a rejected response",
                        "add chosen and rejected (a string, a message or a list of messages), "
                        "e.g. rltune data make-preferences")
        messages = ([{"role": "assistant", "content": value}] if isinstance(value, str) else
                    [value] if isinstance(value, dict) else value)
        try:
            if not isinstance(messages, list) or not messages:
                raise ValueError("expected a string, a message or a non-empty list of "
                                 f"messages, got {type(value).__name__}")
            msgs = [Message.model_validate(m).model_dump(exclude_none=True) for m in messages]
        except (pydantic.ValidationError, ValueError) as exc:
            raise _fail(what, line, f"'{key}' is not a response ({exc})",
                        f"write {key} as a string or as assistant messages "
                        '[{"role": "assistant", "content": ...}]') from None
        if not any(m["role"] == "assistant" for m in msgs):
            raise _fail(what, line, f"'{key}' has no assistant message",
                        f"start {key} with the assistant's turn")
        out.append(msgs)
    return out[0], out[1]


def encode_response(tokenizer: Any, prompt: list[dict[str, Any]],
                    response: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]], *,
                    max_length: int) -> Encoded:
    """Token ids of prompt + response (cut at ``max_length``) and the mask of the response's
    assistant tokens (the prompt's own assistant turns, if any, are context)."""
    ids, mask = encode_messages(tokenizer, prompt + response, tools, max_length=max_length)
    text = tokenizer.apply_chat_template(prompt, tools=tools, tokenize=False)
    prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    shared = 0
    for a, b in zip(prompt_ids, ids, strict=False):
        if a != b:
            break
        shared += 1
    return ids, [0] * shared + mask[shared:]


class _NoSignal:
    """The step's signal as the loop reads it (progress fields); DPO has no rollouts."""

    scores_rollouts = False
    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {
        "dpo_loss": ("dpo/loss", "loss"), "dpo_accuracy": ("dpo/accuracy", "accuracy")}
    critic = None  # nothing to checkpoint besides the policy


class DpoSteps:
    """The steps and validation of an ``algorithm: dpo`` job (step runner + scheduler)."""

    signal = _NoSignal()

    def __init__(self, rt: Any, *, train_rows: list[DataRow], sampler: EpochSampler):
        self.rt, self.hp, self.knobs, self.sampler = rt, rt.hp, rt.knobs, sampler
        self.train = self._encode(train_rows, "training")
        self._ref: dict[tuple[str, int], tuple[float, float]] = {}  # (split, row) → ref logps

    def _encode(self, rows: Sequence[DataRow], what: str) -> list[tuple[Encoded, Encoded]]:
        out = []
        for n, row in enumerate(rows):
            prompt, tools = row.message_dicts(), row.tool_dicts()
            pair = []
            for key, response in zip(PAIR_KEYS, preference_pair(row, what, n), strict=True):
                ids, mask = encode_response(self.rt.tokenizer, prompt, response, tools,
                                            max_length=self.hp.max_length)
                if not any(mask[1:]):
                    raise _fail(what, row.line or n + 1, f"the {key} response has no token "
                                f"within max_length {self.hp.max_length}",
                                "shorten the prompt, or raise max_length")
                mask[0] = 0  # the first token has no context to be predicted from
                pair.append((ids, mask))
            out.append((pair[0], pair[1]))
        return out

    # ---- the scheduler's interface (trainer/scheduler.py) ----
    async def run_step(self, step: int) -> StepResult:
        t0 = time.perf_counter()
        index = list(self.sampler.next_batch())
        metrics = await asyncio.to_thread(self._update, index)
        metrics["timing/s/step"] = time.perf_counter() - t0
        return StepResult(metrics, [], updated=True)

    def data_order(self) -> dict[str, Any]:
        return self.sampler.state_dict()

    async def close(self) -> None:
        return None

    async def validate(self, rows: list[DataRow]) -> dict[str, float]:
        t0 = time.perf_counter()
        pairs = self._encode(rows, "validation")
        stats = await asyncio.to_thread(self._evaluate, pairs)
        return {**stats, "timing/s/validation": time.perf_counter() - t0}

    # ---- log-probs ----
    def _chunks(self, n: int) -> list[list[int]]:
        size = self.hp.micro_batch_size or n or 1
        return [list(range(i, min(n, i + size))) for i in range(0, n, size)]

    def _seq_logp(self, model: Any, pairs: Sequence[tuple[Encoded, Encoded]]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed response log-probs of the chosen and of the rejected responses (B each)."""
        return self._seq_logp_n(model, pairs)[:2]

    def _seq_logp_n(self, model: Any, pairs: Sequence[tuple[Encoded, Encoded]]
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``_seq_logp`` and the chosen responses' token counts."""
        rows = [p[0] for p in pairs] + [p[1] for p in pairs]
        ids, attn = pad_rows([r[0] for r in rows], pad_id=self.rt.tokenizer.pad_token_id or 0)
        logp_BT, _ = token_logprobs_BT(model, ids, attn, bf16=self.hp.bf16)
        mask_BT = pad_rows([r[1] for r in rows], dtype=torch.float32)[0].to(logp_BT.device)
        seq_B = (logp_BT.float() * mask_BT).sum(-1)
        n = len(pairs)
        return seq_B[:n], seq_B[n:], mask_BT[:n].sum(-1).clamp(min=1)

    @contextlib.contextmanager
    def _reference(self) -> Iterator[Any]:
        model = self.rt.model
        if is_lora(model):
            with adapters_disabled(model):
                yield model
            return
        reference = self.rt.updater.reference
        with on_device(reference, next(model.parameters()).device):
            yield reference

    @torch.no_grad()
    def _reference_logps(self, split: str, pairs: Sequence[tuple[Encoded, Encoded]],
                         index: Sequence[int]) -> torch.Tensor:
        """(2, B) reference log-probs of the chosen / rejected responses, computed once."""
        todo = [i for i in index if (split, i) not in self._ref]
        if todo:
            was_training = self.rt.model.training
            self.rt.model.eval()
            with self._reference() as reference:
                for chunk in self._chunks(len(todo)):
                    ids = [todo[c] for c in chunk]
                    chosen, rejected = self._seq_logp(reference, [pairs[i] for i in ids])
                    for i, c, r in zip(ids, chosen.tolist(), rejected.tolist(), strict=True):
                        self._ref[(split, i)] = (c, r)
            self.rt.model.train(was_training)
        return torch.tensor([self._ref[(split, i)] for i in index], dtype=torch.float32).T

    def _loss(self, logps: tuple[torch.Tensor, torch.Tensor], ref_2B: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = self.knobs
        ref_2B = ref_2B.to(logps[0].device)
        return dpo_loss_B(logps[0], logps[1], ref_2B[0], ref_2B[1], beta=k.dpo_beta,
                          loss_type=k.dpo_loss_type, label_smoothing=k.dpo_label_smoothing)

    # ---- the update ----
    def _update(self, index: list[int]) -> dict[str, float]:
        """One optimizer step on the mean DPO loss of the batch's pairs."""
        updater, model = self.rt.updater, self.rt.model
        ref_2B = self._reference_logps("training", self.train, index)
        model.train()
        updater.optimizer.zero_grad(set_to_none=True)
        sums = _Sums()
        for chunk in self._chunks(len(index)):
            chosen, rejected, tokens_B = self._seq_logp_n(
                model, [self.train[index[c]] for c in chunk])
            logps = (chosen, rejected)
            loss_B, chosen_B, rejected_B = self._loss(logps, ref_2B[:, chunk])
            sums.add(loss_B, chosen_B, rejected_B, logps)  # dpo/loss: the DPO part alone
            if self.knobs.dpo_nll_weight:  # RPO: keep the chosen answers likely
                nll_B = -chosen / tokens_B
                sums.add_nll(nll_B)
                loss_B = loss_B + self.knobs.dpo_nll_weight * nll_B
            (loss_B.sum() / len(index)).backward()
        params = [p for p in model.parameters() if p.requires_grad]
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.hp.max_grad_norm))
        lr = updater.optimizer.param_groups[0]["lr"]
        if math.isfinite(norm):
            updater.optimizer.step()
        updater.optimizer.zero_grad(set_to_none=True)
        updater.scheduler.step()
        updater.step += 1
        return {**sums.metrics("dpo/"), "actor/grad_norm": norm, "actor/lr": lr,
                "train/trainable_rows": float(len(index))}

    @torch.no_grad()
    def _evaluate(self, pairs: list[tuple[Encoded, Encoded]]) -> dict[str, float]:
        model = self.rt.model
        ref_2B = self._reference_logps("validation", pairs, range(len(pairs)))
        model.eval()
        sums = _Sums()
        for chunk in self._chunks(len(pairs)):
            logps = self._seq_logp(model, [pairs[c] for c in chunk])
            sums.add(*self._loss(logps, ref_2B[:, chunk]), logps)
        model.train()
        return sums.metrics("validation/dpo/")


class _Sums:
    """The batch's DPO metrics, summed over its chunks (TRL's rewards/* and logps/*)."""

    def __init__(self) -> None:
        self.n = 0
        self.total: dict[str, float] = {}

    def add(self, loss_B: torch.Tensor, chosen_B: torch.Tensor, rejected_B: torch.Tensor,
            logps: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.n += len(loss_B)
        margin_B = chosen_B - rejected_B
        for key, value in (("loss", loss_B), ("reward_margin", margin_B),
                           ("accuracy", (margin_B > 0).float()), ("chosen_reward", chosen_B),
                           ("rejected_reward", rejected_B), ("chosen_logp", logps[0]),
                           ("rejected_logp", logps[1])):
            self.total[key] = self.total.get(key, 0.0) + float(value.detach().float().sum())

    def add_nll(self, nll_B: torch.Tensor) -> None:
        self.total["chosen_nll"] = self.total.get("chosen_nll", 0.0) + float(nll_B.detach().sum())

    def metrics(self, prefix: str) -> dict[str, float]:
        return {prefix + k: v / max(1, self.n) for k, v in self.total.items()}
