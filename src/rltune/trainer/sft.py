"""Supervised fine-tuning before RL (``algorithm: sft``; Ark's FinetuneSft / FinetuneLoRA).

An SFT job reads the same datasets as an RL job, but each row's ``messages`` are the
conversation to imitate: the loss is the token-mean negative log-likelihood of every assistant
turn (its content, its tool calls and its ``<|im_end|>``); system, user and tool-result tokens
only give context. The masks come from ``rltune.models.chat_template.assistant_token_mask``,
the same code as the demo models' warm start, on the job's own chat template (ChatML, as the
Qwen family and rltune's demo models use).

``SftSteps`` stands in for the step runner and scheduler of an RL job inside the same
``Trainer`` (``trainer/loop.py``), so checkpoints, resume, trackers, progress, the console and
publishing are those of RL jobs: each step takes ``batch_size`` rows from the epoch sampler and
makes one optimizer step with the policy's AdamW and LR schedule; validation reports the loss
on the validation rows (``validation/sft/loss``). Publish the job's model and start an RL job
from it with ``model: <published name>``.

Example (a conversation with one tool call: both assistant turns train, the tool result not):
    >>> from rltune.models.tokenizer import train_tokenizer
    >>> tok = train_tokenizer(n_transcripts=30)
    >>> msgs = [{"role": "user", "content": "2+3?"},
    ...         {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
    ...          "function": {"name": "calculator", "arguments": {"expression": "2+3"}}}]},
    ...         {"role": "tool", "content": "5"}, {"role": "assistant", "content": "5"}]
    >>> ids, mask = encode_messages(tok, msgs, None, max_length=512)
    >>> text = tok.decode([i for i, m in zip(ids, mask) if m])
    >>> "<tool_call>" in text and "5<|im_end|>" in text and "tool_response" not in text
    True
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import torch

from rltune.config.data import DataRow, EpochSampler
from rltune.models.chat_template import IM_END, IM_START, assistant_token_mask
from rltune.sdk.errors import ConfigError, DatasetError
from rltune.trainer.logprobs import pad_rows, token_logprobs_BT
from rltune.trainer.step import StepResult
from rltune.trainer.update import PolicyUpdater

if TYPE_CHECKING:
    from rltune.trainer.runtime import TrainingRuntime


def encode_messages(tokenizer: Any, messages: list[dict[str, Any]],
                    tools: Optional[list[dict[str, Any]]], *, max_length: int
                    ) -> tuple[list[int], list[int]]:
    """Token ids of the rendered conversation (cut at ``max_length``) and its loss mask: 1 on
    the assistant turns' tokens (tool calls and ``<|im_end|>`` included)."""
    vocab = tokenizer.get_vocab()
    if IM_START not in vocab or IM_END not in vocab:
        raise ConfigError("algorithm sft masks the assistant turns of ChatML chat templates "
                          f"({IM_START} ... {IM_END}), and this model's tokenizer has none",
                          where="hyper_parameters.algorithm",
                          hint="use a model with a ChatML template (Qwen family, rltune's demo "
                               "models)")
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_length]
    header = tokenizer.encode(IM_START + "assistant\n", add_special_tokens=False)
    return ids, assistant_token_mask(ids, header, vocab[IM_END])


class _NoSignal:
    """The step's signal as the loop reads it (progress fields); SFT has no rollouts."""

    scores_rollouts = False
    progress_fields: ClassVar[dict[str, tuple[str, str]]] = {"sft_loss": ("sft/loss", "loss")}
    critic = None  # nothing to checkpoint besides the policy


class SftSteps:
    """The steps and validation of an ``algorithm: sft`` job (step runner + scheduler)."""

    signal = _NoSignal()

    def __init__(self, rt: TrainingRuntime, *, train_rows: list[DataRow], sampler: EpochSampler):
        self.rt, self.hp, self.sampler = rt, rt.hp, sampler
        self.train = self._encode(train_rows, "training")

    def _encode(self, rows: Sequence[DataRow], what: str) -> list[tuple[list[int], list[int]]]:
        out = []
        for n, row in enumerate(rows):
            ids, mask = encode_messages(self.rt.tokenizer, row.message_dicts(), row.tool_dicts(),
                                        max_length=self.hp.max_length)
            if not any(mask[1:]):
                raise DatasetError(
                    f"{what} row {row.line or n + 1} has no assistant turn within max_length "
                    f"{self.hp.max_length} tokens: an SFT row must show the answer to learn",
                    where=f"{what} dataset, line {row.line or n + 1}",
                    hint="add the assistant message(s) to its messages, or raise max_length")
            mask[0] = 0  # the first token has no context to be predicted from
            out.append((ids, mask))
        return out

    # ---- the scheduler's interface (trainer/scheduler.py) ----
    async def run_step(self, step: int) -> StepResult:
        t0 = time.perf_counter()
        batch = [self.train[i] for i in self.sampler.next_batch()]
        metrics = await asyncio.to_thread(self._update, batch)
        metrics["timing/s/step"] = time.perf_counter() - t0
        return StepResult(metrics, [], updated=True)

    def data_order(self) -> dict[str, Any]:
        return self.sampler.state_dict()

    async def close(self) -> None:
        return None

    async def validate(self, rows: list[DataRow]) -> dict[str, float]:
        t0 = time.perf_counter()
        loss, tokens = await asyncio.to_thread(self._nll, self._encode(rows, "validation"))
        return {"validation/sft/loss": loss, "validation/sft/tokens": float(tokens),
                "timing/s/validation": time.perf_counter() - t0}

    # ---- the loss ----
    def _chunks(self, n: int) -> list[list[int]]:
        size = self.hp.micro_batch_size or n or 1
        return [list(range(i, min(n, i + size))) for i in range(0, n, size)]

    def _logp(self, batch: Sequence[tuple[list[int], list[int]]]
              ) -> tuple[torch.Tensor, torch.Tensor]:
        model, pad = self.rt.model, self.rt.tokenizer.pad_token_id or 0
        ids, attn = pad_rows([b[0] for b in batch], pad_id=pad)
        logp_BT, _ = token_logprobs_BT(model, ids, attn, bf16=self.hp.bf16)
        mask_BT = pad_rows([b[1] for b in batch], dtype=torch.float32)[0].to(logp_BT.device)
        return logp_BT, mask_BT

    def _update(self, batch: list[tuple[list[int], list[int]]]) -> dict[str, float]:
        """One optimizer step on the token-mean NLL of the batch's assistant tokens."""
        updater, model = self.rt.updater, self.rt.model
        # HyperParameters refuses ranks for sft: the optimizer is this process's own
        assert isinstance(updater, PolicyUpdater), "algorithm sft trains in one process"
        tokens = float(max(1, sum(sum(m) for _, m in batch)))
        model.train()
        updater.optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for chunk in self._chunks(len(batch)):
            logp_BT, mask_BT = self._logp([batch[i] for i in chunk])
            loss = -(logp_BT * mask_BT).sum() / tokens
            loss.backward()
            loss_sum += float(loss.detach())
        params = [p for p in model.parameters() if p.requires_grad]
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.hp.max_grad_norm))
        lr = updater.optimizer.param_groups[0]["lr"]
        if math.isfinite(norm):
            updater.optimizer.step()
        updater.optimizer.zero_grad(set_to_none=True)
        updater.scheduler.step()
        updater.step += 1
        return {"sft/loss": loss_sum, "sft/tokens": tokens, "actor/grad_norm": norm,
                "actor/lr": lr, "train/trainable_rows": float(len(batch))}

    @torch.no_grad()
    def _nll(self, rows: list[tuple[list[int], list[int]]]) -> tuple[float, float]:
        model = self.rt.model
        model.eval()
        total = tokens = 0.0
        for chunk in self._chunks(len(rows)):
            logp_BT, mask_BT = self._logp([rows[i] for i in chunk])
            total -= float((logp_BT * mask_BT).sum())
            tokens += float(mask_BT.sum())
        model.train()
        return (total / tokens if tokens else float("nan")), tokens
