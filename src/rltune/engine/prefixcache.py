"""A token-prefix KV cache: a radix tree of computed KV, per weight version, bounded by LRU.

Every later turn of an agent's episode sends a prompt that extends the previous prompt and the
completion the engine sampled for it, token for token; GRPO's ``n`` copies of a prompt share all
of it. The built-in engine keeps the KV it computes, each prompt's at prefill and each finished
sequence's (prompt + completion) when it leaves the batch, in this tree, and a new prompt starts
its prefill after the longest cached prefix it has, so only its new tokens run.

* Keyed by token ids: each edge holds a run of tokens and their KV, per layer ``(keys,
  values)`` of shape [1, heads, tokens, head_dim]; an insert splits an edge where two sequences
  part. Rotary position is baked into the keys, so a prefix's KV is the same whatever follows.
* Keyed by weight version: KV computed under other weights is wrong for the new ones, so the
  whole tree is dropped when the weights change (``clear``, and any insert under another
  version). With ``partial_rollouts`` an episode that spans an update re-prefills its next turn
  once under the new weights, then reuses again.
* Bounded: ``max_bytes`` of keys and values in all; past it the least recently used leaves go
  first (a prefix shared by many sequences stays as long as one of them is used).
  ``max_bytes=0`` keeps nothing.

The bound's default is ``RLTUNE_PREFIX_CACHE_MB`` (MiB, docs/env.md), else
``PREFIX_CACHE_MB``.

Example:
    >>> import torch
    >>> kv = lambda n: [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]
    >>> cache = PrefixCache(max_bytes=1 << 20)
    >>> cache.insert([1, 2, 3, 4], kv(4), version=0)
    >>> n, layers = cache.lookup([1, 2, 3, 9], version=0)
    >>> n, layers[0][0].shape[2], cache.lookup([1, 2], version=1)[0]
    (3, 3, 0)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Optional

from rltune.sdk.errors import ConfigError

#: The cache bound (MiB of keys and values) when ``RLTUNE_PREFIX_CACHE_MB`` is not set. On the
#: nano model (fp32) a token costs 2 x layers x kv_heads x head_dim x 4 bytes, about 12 KiB:
#: 1 GiB holds ~85k tokens, some hundreds of multi-turn episodes.
PREFIX_CACHE_MB = 1024
ENV_VAR = "RLTUNE_PREFIX_CACHE_MB"

#: One layer's KV for a run of tokens: (keys, values), each [1, heads, tokens, head_dim].
Layers = list[tuple[Any, Any]]


def default_cache_bytes() -> int:
    """The cache bound in bytes: ``RLTUNE_PREFIX_CACHE_MB`` (MiB), else ``PREFIX_CACHE_MB``."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return PREFIX_CACHE_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise ConfigError(f"{ENV_VAR}={raw!r} is not a size in MiB", where=ENV_VAR,
                          hint=f"set a number >= 0 (0 turns the engine's prefix cache off; "
                          f"default {PREFIX_CACHE_MB})")
    return int(mb * (1 << 20))


class _Node:
    """An edge of the tree: a run of tokens, their KV, and the edges that continue it."""

    __slots__ = ("children", "layers", "nbytes", "parent", "tokens", "used")

    def __init__(self, tokens: tuple[int, ...], layers: Layers, parent: Optional[_Node],
                 used: int):
        self.tokens = tokens
        self.layers = layers
        self.children: dict[int, _Node] = {}
        self.parent = parent
        self.used = used
        self.nbytes = sum(int(k.nbytes) + int(v.nbytes) for k, v in layers)


def _slice(layers: Layers, start: int, end: Optional[int] = None) -> Layers:
    """Columns ``start:end`` of every layer, copied (a slice would keep the whole tensor)."""
    return [(k[:, :, start:end].clone(), v[:, :, start:end].clone()) for k, v in layers]


class PrefixCache:
    """Radix tree of KV keyed by token ids, for one weight version, LRU-bounded in bytes."""

    def __init__(self, max_bytes: Optional[int] = None):
        self.max_bytes = default_cache_bytes() if max_bytes is None else int(max_bytes)
        if self.max_bytes < 0:
            raise ConfigError(f"prefix_cache_bytes is {self.max_bytes}", where="engine",
                              hint="pass a size in bytes >= 0 (0 turns the cache off)")
        self.version = -1
        self._root = _Node((), [], None, 0)
        self._tick = 0
        self.bytes = 0
        self.tokens = 0
        self.stats: dict[str, int] = dict.fromkeys(
            ("lookups", "hits", "hit_tokens", "inserted_tokens", "evictions",
             "evicted_tokens", "invalidations"), 0)

    # -- reading ----------------------------------------------------------------------------

    def lookup(self, ids: Sequence[int], version: int, limit: Optional[int] = None,
               count: bool = True) -> tuple[int, Layers]:
        """The longest cached prefix of ``ids[:limit]`` under weights ``version``: its length
        and its KV per layer ([1, H, length, D], a copy); ``(0, [])`` when none. ``count``:
        add to the ``lookups`` / ``hits`` / ``hit_tokens`` counters (one per prompt)."""
        import torch

        self.stats["lookups"] += count
        ids = ids[:limit] if limit is not None else ids
        if version != self.version or not ids:
            return 0, []
        self._tick += 1
        parts: list[Layers] = []
        node, pos = self._root, 0
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                break
            n = 0
            stop = min(len(child.tokens), len(ids) - pos)
            while n < stop and child.tokens[n] == ids[pos + n]:
                n += 1
            child.used = self._tick
            parts.append(child.layers if n == len(child.tokens) else
                         [(k[:, :, :n], v[:, :, :n]) for k, v in child.layers])
            pos += n
            if n < len(child.tokens):
                break
            node = child
        if not pos:
            return 0, []
        self.stats["hits"] += count
        self.stats["hit_tokens"] += pos * count
        layers = [(torch.cat([p[i][0] for p in parts], dim=2),
                   torch.cat([p[i][1] for p in parts], dim=2)) for i in range(len(parts[0]))]
        return pos, layers

    def snapshot(self) -> dict[str, int]:
        """Counters and size, for the gateway's ``/health``."""
        return {**self.stats, "tokens": self.tokens, "bytes": self.bytes,
                "max_bytes": self.max_bytes, "weight_version": self.version}

    # -- writing ----------------------------------------------------------------------------

    def insert(self, ids: Sequence[int], layers: Layers, version: int) -> None:
        """Keep the KV of ``ids`` (``layers``: [1, H, len(ids), D] each, from position 0),
        computed under weights ``version``; a newer version drops what was kept first, an
        older one is not kept."""
        if version < self.version:
            return
        if version > self.version:
            self.clear(version)
        if not ids or self.max_bytes <= 0:
            return
        ids = tuple(ids)
        self._tick += 1
        node, pos = self._root, 0
        while pos < len(ids):
            node.used = self._tick
            child = node.children.get(ids[pos])
            if child is None:
                new = _Node(ids[pos:], _slice(layers, pos), node, self._tick)
                node.children[ids[pos]] = new
                self._grow(new, len(ids) - pos)
                break
            n = 0
            stop = min(len(child.tokens), len(ids) - pos)
            while n < stop and child.tokens[n] == ids[pos + n]:
                n += 1
            if n < len(child.tokens):
                child = self._split(child, n)
            pos += n
            node = child
        node.used = self._tick
        self._evict()

    def clear(self, version: int = -1) -> None:
        """Forget everything: the weights changed to ``version`` (-1: not known yet)."""
        if self._root.children:
            self.stats["invalidations"] += 1
        self._root = _Node((), [], None, 0)
        self.bytes = self.tokens = 0
        self.version = version

    def _grow(self, node: _Node, tokens: int) -> None:
        self.bytes += node.nbytes
        self.tokens += tokens
        self.stats["inserted_tokens"] += tokens

    def _split(self, node: _Node, at: int) -> _Node:
        """Cut ``node``'s edge after ``at`` tokens; returns the new upper part."""
        parent = node.parent
        assert parent is not None
        upper = _Node(node.tokens[:at], _slice(node.layers, 0, at), parent, node.used)
        lower_layers = _slice(node.layers, at)
        self.bytes -= node.nbytes
        node.tokens, node.layers = node.tokens[at:], lower_layers
        node.nbytes = sum(int(k.nbytes) + int(v.nbytes) for k, v in lower_layers)
        node.parent = upper
        upper.children[node.tokens[0]] = node
        parent.children[upper.tokens[0]] = upper
        self.bytes += upper.nbytes + node.nbytes
        return upper

    def _evict(self) -> None:
        """Drop least recently used leaves until the tree fits ``max_bytes``."""
        while self.bytes > self.max_bytes:
            leaf = min(self._leaves(), key=lambda n: n.used, default=None)
            if leaf is None or leaf.parent is None:
                return
            del leaf.parent.children[leaf.tokens[0]]
            self.bytes -= leaf.nbytes
            self.tokens -= len(leaf.tokens)
            self.stats["evictions"] += 1
            self.stats["evicted_tokens"] += len(leaf.tokens)

    def _leaves(self) -> list[_Node]:
        out: list[_Node] = []
        todo = list(self._root.children.values())
        while todo:
            node = todo.pop()
            if node.children:
                todo.extend(node.children.values())
            else:
                out.append(node)
        return out
