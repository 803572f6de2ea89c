"""The teacher of on-policy distillation (``training.type: pg_opd``): a frozen model that scores
the student's sampled tokens.

``Teacher.load`` reads a model directory into the trainer process (eval, no gradients)
and refuses a teacher whose tokenizer differs from the student's: OPD compares the two models
token by token (advantage ``-(log pi - log pi_teacher)``, docs/architecture.md), which only means
something when a token id is the same token for both. ``Teacher.logprobs(rows)`` returns
``log pi_teacher(x_t | x_<t)`` per token, at the sampling temperature, exactly as the
updater's ``compute_logprobs`` does for the student.

Example (an untrained tiny model as its own teacher):
    >>> from rltune.trainer.testing import tiny_qwen2
    >>> teacher = Teacher(tiny_qwen2(seed=1))
    >>> lp = teacher.logprobs([[1, 5, 7], [1, 6]])
    >>> [len(x) for x in lp], lp[0][0], all(v < 0 for v in lp[0][1:])
    ([3, 2], 0.0, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import torch

from rltune.sdk.errors import ConfigError
from rltune.trainer.device import on_device
from rltune.trainer.logprobs import chunk_positions, pad_rows, token_logprobs_BT


def check_same_vocabulary(
    student_vocab: Mapping[str, int],
    teacher_vocab: Mapping[str, int],
    *,
    student: str,
    teacher: str,
) -> None:
    """Raise ``ConfigError`` unless both tokenizers map the same tokens to the same ids."""
    if dict(student_vocab) == dict(teacher_vocab):
        return
    differ = sorted(
        tok for tok in set(student_vocab) | set(teacher_vocab)
        if student_vocab.get(tok) != teacher_vocab.get(tok)
    )
    example = differ[0]
    raise ConfigError(
        f"teacher model {teacher!r} does not share the tokenizer of the student model "
        f"{student!r}: {len(differ)} tokens differ (e.g. {example!r} is id "
        f"{student_vocab.get(example)} for the student, {teacher_vocab.get(example)} for the "
        f"teacher; vocabularies of {len(student_vocab)} and {len(teacher_vocab)} tokens)",
        where="teacher_model",
        hint="on-policy distillation compares the models token by token: pick a teacher of "
        "the student's model family (same tokenizer), or a student of the teacher's",
    )


class Teacher:
    """A frozen model that returns per-token log-probs of rows (no gradients)."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        temperature: float = 1.0,
        micro_batch_size: Optional[int] = None,
        pad_token_id: int = 0,
        bf16: bool = False,
        device: torch.device | str | None = None,
        chunk_mib: Optional[int] = None,
    ):
        self.model = model.eval().requires_grad_(False)
        self.temperature = temperature
        self.micro_batch_size = micro_batch_size
        self.pad_token_id = pad_token_id
        self.bf16 = bf16
        # where the forward passes run; the weights may wait elsewhere (reference_offload)
        self.device = torch.device(device) if device is not None \
            else next(model.parameters()).device
        self.chunk_tokens = chunk_positions(model, chunk_mib) if chunk_mib else None

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        student_tokenizer: Any,
        student_name: str,
        teacher_name: Optional[str] = None,
        home: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        **kwargs: Any,
    ) -> Teacher:
        """Load the teacher from a model directory after checking its tokenizer.

        The weights are kept on ``home`` in ``dtype``; ``kwargs`` go to ``Teacher``
        (temperature, micro_batch_size, pad_token_id, bf16, device, chunk_mib).
        """
        from transformers import AutoModelForCausalLM

        from rltune.models import load_tokenizer

        name = teacher_name or str(path)
        # The tokenizer is checked before the (possibly large) weights are read.
        check_same_vocabulary(
            student_tokenizer.get_vocab(),
            load_tokenizer(path).get_vocab(),
            student=student_name,
            teacher=name,
        )
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(home)
        return cls(model, **kwargs)

    @torch.no_grad()
    def logprobs(self, rows: Sequence[Sequence[int]]) -> list[list[float]]:
        """``log pi_teacher(x_t | x_<t)`` for every token of every row (position 0 is 0)."""
        out: list[list[float]] = []
        size = self.micro_batch_size or len(rows) or 1
        with on_device(self.model, self.device):
            for start in range(0, len(rows), size):
                chunk = rows[start : start + size]
                ids, attn = pad_rows(chunk, pad_id=self.pad_token_id)
                logp, _ = token_logprobs_BT(
                    self.model, ids, attn, temperature=self.temperature, bf16=self.bf16,
                    chunk_tokens=self.chunk_tokens,
                )
                out.extend(logp[j, : len(row)].tolist() for j, row in enumerate(chunk))
        return out
