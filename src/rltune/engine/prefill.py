"""Prefill planning: each distinct prompt once, their common prefix once, cached KV reused.

GRPO sends every prompt ``n`` times, and an agent's requests all begin with the same system
prompt and tool schemas (on the nano calculator about 150 of a prompt's 190 tokens); each later
turn of an episode extends the previous turn's prompt and completion. So a prefill of B rows
needs far less than B full prompts of compute:

1. identical prompts are computed once and their rows copied (KV cache and logits);
2. the prefix common to the distinct prompts runs once, with batch size 1 (it is not computed
   again when it is cached), and its KV serves every row;
3. each row then starts after the longest prefix of its prompt that the engine's prefix cache
   holds (:mod:`rltune.engine.prefixcache`, kept per weight version), or after the common
   prefix, and only the rest of its prompt (its *suffix*) runs, batched.

Layout of a row: ``[pad | cached | pad | suffix]``. The cached columns hold the KV of the
row's own reused prefix, left-padded to the longest one, and the suffixes are left-padded
after them; the attention mask hides the holes and position ids count real tokens only, so
every token sits at its own position, as in an unpadded forward (the engine's KV-cache check
at start-up verifies that cached steps are exact).

Example:
    >>> p = plan_prefill([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], min_shared=2)
    >>> p.unique, p.row_of, p.shared
    ([[1, 2, 3, 4], [1, 2, 3, 5]], [0, 1, 0], 3)
    >>> p.computed_tokens(starts=[3, 3], reused=2)
    3
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The shortest common prefix worth a forward pass of its own (batch 1): below it no prefix is
#: run on its own (each row still starts after its cached prefix). A forward costs a few ms of
#: Python however short; 16 tokens of a batched prefill cost less than that on the nano model.
MIN_SHARED_TOKENS = 16


@dataclass
class PrefillPlan:
    """How one admission's prompts are prefilled."""

    #: the distinct prompts, in first-seen order
    unique: list[list[int]]
    #: for each admitted row, the index of its prompt in ``unique``
    row_of: list[int]
    #: tokens of the common prefix run once, batch 1 (0: no prefix is shared)
    shared: int

    @property
    def duplicated(self) -> bool:
        """Some rows copy another row's prompt (so the computed rows are expanded)."""
        return len(self.unique) < len(self.row_of)

    def computed_tokens(self, starts: Sequence[int], reused: int) -> int:
        """Tokens run through the model when each distinct prompt's suffix starts at
        ``starts[i]`` and ``reused`` tokens of the common prefix came from the cache."""
        shared = self.shared - reused if self.shared else 0
        return shared + sum(len(u) - s for u, s in zip(self.unique, starts, strict=True))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def plan_prefill(prompts: Sequence[Sequence[int]],
                 min_shared: int = MIN_SHARED_TOKENS) -> PrefillPlan:
    """Plan a prefill of ``prompts``: the distinct ones, and the prefix they share (when at
    least ``min_shared`` tokens long)."""
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
    return PrefillPlan(unique, row_of, shared if shared >= min_shared else 0)
