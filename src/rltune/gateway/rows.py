"""Captured calls → token-exact training rows (docs/design.md, "The data path").

Rule: a call extends an open row when its prompt ids start with that row's ids exactly; the
gap (tool results, the next user turn, template tokens such as ``<|im_end|>\\n``) enters with
loss mask 0 and the sampled completion with mask 1. Otherwise the call starts a new row. The
most recent row is tried first, then older ones, so ``n > 1`` choices and interleaved
sub-conversations each continue their own row.

When a call does not extend any row although its *messages* continue an earlier call's
conversation, the chat template (or the client) rewrote an earlier turn: the tokens the model
saw at sampling time are not a prefix of what it sees now. That is counted and described in
``RowsResult.breaks`` (never hidden), and the call starts a new row.

Example:
    >>> from rltune.gateway.capture import CapturedCall
    >>> a = CapturedCall(rollout_id="r", call_index=0, prompt_ids=[1, 2],
    ...                  completion_ids=[3, 4], completion_logprobs=[-0.1, -0.2],
    ...                  finish_reason="stop")
    >>> b = CapturedCall(rollout_id="r", call_index=1, prompt_ids=[1, 2, 3, 4, 9, 9],
    ...                  completion_ids=[5], completion_logprobs=[-0.3], finish_reason="stop")
    >>> res = build_rows([a, b])
    >>> res.rows[0].input_ids, res.rows[0].loss_mask
    ([1, 2, 3, 4, 9, 9, 5], [0, 0, 1, 1, 0, 0, 1])
    >>> res.template_rewrites
    0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from pydantic import BaseModel, Field

from rltune.gateway.capture import CapturedCall


class TokenSequence(BaseModel):
    """One token sequence of a rollout, as the gateway captured it (a dataset row is a prompt;
    the trainer's ``TrainingRow`` is built from one of these).

    ``sampled_logprobs[i]`` is the engine's log-prob of ``input_ids[i]`` where
    ``loss_mask[i] == 1`` and 0.0 elsewhere; ``token_versions[i]`` is the engine weight version
    that sampled it (-1 where nothing was sampled): a multi-turn rollout whose weights changed
    between two calls carries both versions (the asynchronous pipeline's staleness).
    ``prompt_length`` is where the first sampled token sits (the trainer's
    ``max_prompt_length`` applies to it).
    """

    input_ids: list[int] = Field(default_factory=list)
    loss_mask: list[int] = Field(default_factory=list)
    sampled_logprobs: list[float] = Field(default_factory=list)
    prompt_length: int = 0
    call_indices: list[tuple[int, int]] = Field(default_factory=list)
    finish_reasons: list[str] = Field(default_factory=list)
    weight_versions: list[int] = Field(default_factory=list)  # one per merged call
    token_versions: list[int] = Field(default_factory=list)

    @property
    def num_sampled(self) -> int:
        return sum(self.loss_mask)

    def sampled_versions(self) -> list[int]:
        """The weight version of every sampled token, in order."""
        return [v for v, m in zip(self.token_versions, self.loss_mask, strict=False) if m]

    def _append(self, ids: Sequence[int], mask: int, lps: Optional[Sequence[float]],
                version: int = -1) -> None:
        self.input_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.sampled_logprobs.extend(lps if lps is not None else [0.0] * len(ids))
        self.token_versions.extend([version if mask else -1] * len(ids))


class RowBreak(BaseModel):
    """A call that continued an earlier call's conversation but not its tokens."""

    call_index: int
    choice_index: int
    previous_call_index: int
    first_mismatch: int  # token position where the new prompt leaves the old row
    expected_ids: list[int]  # a few row tokens from that position (what the model had seen)
    found_ids: list[int]  # the new prompt's tokens there


class RowsResult(BaseModel):
    rows: list[TokenSequence]
    template_rewrites: int = 0
    breaks: list[RowBreak] = Field(default_factory=list)


def build_rows(calls: Sequence[CapturedCall]) -> RowsResult:
    """Merge the calls of ONE rollout (in ``call_index`` order) into training rows."""
    ordered = sorted(calls, key=lambda c: (c.call_index, c.choice_index))
    if len({c.rollout_id for c in ordered}) > 1:
        raise ValueError("build_rows() takes the calls of one rollout; group them by rollout_id")
    rows: list[TokenSequence] = []
    owners: list[CapturedCall] = []  # last call merged into each row
    breaks: list[RowBreak] = []
    for call in ordered:
        target = _find_row(rows, call.prompt_ids)
        if target is None:
            brk = _detect_rewrite(call, rows, owners)
            if brk is not None:
                breaks.append(brk)
            row = TokenSequence(prompt_length=len(call.prompt_ids))
            row._append(call.prompt_ids, 0, None)
            rows.append(row)
            owners.append(call)
            target = len(rows) - 1
        else:
            row = rows[target]
            row._append(call.prompt_ids[len(row.input_ids):], 0, None)
            owners[target] = call
        row = rows[target]
        row._append(call.completion_ids, 1, call.completion_logprobs, call.weight_version)
        row.call_indices.append((call.call_index, call.choice_index))
        row.finish_reasons.append(call.finish_reason)
        row.weight_versions.append(call.weight_version)
    return RowsResult(rows=rows, template_rewrites=len(breaks), breaks=breaks)


def _find_row(rows: list[TokenSequence], prompt: list[int]) -> Optional[int]:
    for i in range(len(rows) - 1, -1, -1):
        ids = rows[i].input_ids
        if len(prompt) >= len(ids) and prompt[: len(ids)] == ids:
            return i
    return None


def _detect_rewrite(call: CapturedCall, rows: list[TokenSequence], owners: list[CapturedCall]
                    ) -> Optional[RowBreak]:
    """If ``call``'s messages continue a row's last call, report where the tokens diverge."""
    for i in range(len(rows) - 1, -1, -1):
        prev = owners[i]
        if not prev.messages or not _continues(call.messages, prev.messages):
            continue
        ids, prompt = rows[i].input_ids, call.prompt_ids
        pos = next((k for k, (a, b) in enumerate(zip(ids, prompt, strict=False)) if a != b),
                   min(len(ids), len(prompt)))
        return RowBreak(call_index=call.call_index, choice_index=call.choice_index,
                        previous_call_index=prev.call_index, first_mismatch=pos,
                        expected_ids=ids[pos:pos + 8], found_ids=prompt[pos:pos + 8])
    return None


def _continues(messages: list[dict[str, Any]], earlier: list[dict[str, Any]]) -> bool:
    """``messages`` = ``earlier`` (same roles and text) + an assistant turn + more."""
    if len(messages) <= len(earlier):
        return False
    for new, old in zip(messages, earlier, strict=False):
        if new.get("role") != old.get("role") or _text(new) != _text(old):
            return False
    return messages[len(earlier)].get("role") == "assistant"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""
