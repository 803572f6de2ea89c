"""Prefill planning: each distinct prompt once, their common prefix once, the last prefix kept.

GRPO sends every prompt ``n`` times, and an agent's requests all begin with the same system
prompt and tool schemas (on the nano calculator about 150 of a prompt's 190 tokens). So a
prefill of B rows needs far less than B full prompts of compute:

1. identical prompts are computed once and their rows copied (KV cache and logits);
2. the prefix common to the distinct prompts runs once, with batch size 1, and its KV is
   repeated for every row; only the rest of each prompt (its *suffix*) runs batched;
3. that prefix's KV is kept (one entry, tagged with the weight version), and the next
   admission starts from the part it shares with it, so requests that arrive while a batch
   runs pay only for what is new. A weight update forgets it.

Layout of a row: ``[prefix | pad | suffix]``. The prefix columns are real tokens in every row
and the suffixes are left-padded after them; the attention mask hides the holes and position
ids count real tokens only, so every token sits at its own position, as in an unpadded
forward (the engine's KV-cache check at start-up verifies that cached steps are exact).

Example:
    >>> p = plan_prefill([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], kept=(1, 2, 9), min_shared=2)
    >>> p.unique, p.row_of, p.shared, p.reused
    ([[1, 2, 3, 4], [1, 2, 3, 5]], [0, 1, 0], 3, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The shortest common prefix worth a forward pass of its own (batch 1): below it the prompts
#: are prefilled whole. A forward costs a few ms of Python however short; 16 tokens of a
#: batched prefill cost less than that on the nano model.
MIN_SHARED_TOKENS = 16


@dataclass
class PrefillPlan:
    """How one admission's prompts are prefilled."""

    #: the distinct prompts, in first-seen order
    unique: list[list[int]]
    #: for each admitted row, the index of its prompt in ``unique``
    row_of: list[int]
    #: tokens of the common prefix run once, batch 1 (0: the prompts run whole)
    shared: int
    #: of those, tokens taken from the kept prefix (not computed again)
    reused: int

    @property
    def duplicated(self) -> bool:
        """Some rows copy another row's prompt (so the computed rows are expanded)."""
        return len(self.unique) < len(self.row_of)

    def computed_tokens(self) -> int:
        """Tokens this plan runs through the model."""
        return self.shared - self.reused + sum(len(u) - self.shared for u in self.unique)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def plan_prefill(prompts: Sequence[Sequence[int]], kept: Sequence[int] = (),
                 min_shared: int = MIN_SHARED_TOKENS) -> PrefillPlan:
    """Plan a prefill of ``prompts``; ``kept``: the ids of the kept prefix (same weights)."""
    index: dict[tuple[int, ...], int] = {}
    unique: list[list[int]] = []
    row_of: list[int] = []
    for p in prompts:
        key = tuple(p)
        if key not in index:
            index[key] = len(unique)
            unique.append(list(p))
        row_of.append(index[key])
    first = unique[0]
    # every row keeps at least one token of its own: its logits come from the suffix forward
    shared = min(len(u) for u in unique) - 1
    for u in unique[1:]:
        shared = min(shared, common_prefix(first, u))
    if shared < min_shared:
        return PrefillPlan(unique, row_of, 0, 0)
    reused = min(common_prefix(kept, first), shared) if kept else 0
    return PrefillPlan(unique, row_of, shared, reused if reused >= min_shared else 0)


class KeptPrefix:
    """The KV of the last shared prefix: ids, per layer ``(keys, values)`` [1, H, T, D], and
    the weight version it was computed with."""

    def __init__(self) -> None:
        self.ids: tuple[int, ...] = ()
        self.layers: list[tuple[Any, Any]] = []
        self.version = -1

    def ids_for(self, version: int) -> tuple[int, ...]:
        """The kept ids if they were computed with weights ``version``, else none."""
        return self.ids if version == self.version else ()

    def keep(self, ids: Sequence[int], layers: list[tuple[Any, Any]], version: int) -> None:
        """Keep a new prefix, unless the kept one (same weights) already starts with it."""
        ids = tuple(ids)
        if version == self.version and self.ids[:len(ids)] == ids:
            return
        self.ids, self.version = ids, version
        self.layers = [(k.clone(), v.clone()) for k, v in layers]

    def clear(self) -> None:
        self.ids, self.layers, self.version = (), [], -1
