"""A left-padded running batch: KV cache plus attention mask, with rows that come and go.

Rows are left-padded so every row's next token sits in the same (last) column. New rows are
merged by left-padding whichever side is shorter; finished rows are dropped by index; columns
that became padding for every row are trimmed so the batch never drags dead context along.
Rotary position is baked into the cached keys, so padding a cache on the left does not move
any real token; the mask hides the padding and position ids count only real tokens.
"""

from __future__ import annotations

from typing import Any


class KVBatch:
    """KV cache ([B, H, T, D] per layer) and its [B, T] attention mask, kept in step."""

    def __init__(self, cache: Any, mask: Any):
        self.cache = cache
        self.mask = mask

    @property
    def size(self) -> int:
        return int(self.mask.shape[0])

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    def _layers(self) -> list[Any]:
        return list(self.cache.layers)

    def _pad_left(self, pad: int) -> None:
        import torch

        if pad <= 0:
            return
        for layer in self._layers():
            k, v = layer.keys, layer.values
            layer.keys = torch.cat([k.new_zeros(*k.shape[:2], pad, k.shape[3]), k], dim=2)
            layer.values = torch.cat([v.new_zeros(*v.shape[:2], pad, v.shape[3]), v], dim=2)
        self.mask = torch.cat([self.mask.new_zeros(self.size, pad), self.mask], dim=1)

    def merge(self, other: KVBatch) -> None:
        """Append ``other``'s rows after this batch's rows (both left-padded to one length)."""
        import torch

        length = max(self.length, other.length)
        self._pad_left(length - self.length)
        other._pad_left(length - other.length)
        for mine, theirs in zip(self._layers(), other._layers(), strict=True):
            mine.keys = torch.cat([mine.keys, theirs.keys], dim=0)
            mine.values = torch.cat([mine.values, theirs.values], dim=0)
        self.mask = torch.cat([self.mask, other.mask], dim=0)

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (in that order), then trim all-padding columns on the left."""
        import torch

        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        for layer in self._layers():
            layer.keys = layer.keys.index_select(0, index)
            layer.values = layer.values.index_select(0, index)
        self.mask = self.mask.index_select(0, index)
        self._trim()

    def _trim(self) -> None:
        live = self.mask.any(dim=0).nonzero()
        first = int(live[0]) if len(live) else self.length
        if first == 0:
            return
        for layer in self._layers():
            layer.keys = layer.keys[:, :, first:]
            layer.values = layer.values[:, :, first:]
        self.mask = self.mask[:, first:]

    def row_layers(self, row: int) -> list[tuple[Any, Any]]:
        """Row ``row``'s KV without its padding: per layer (keys, values) [1, H, tokens, D]."""
        columns = self.mask[row].nonzero().squeeze(1)
        return [(layer.keys[row:row + 1].index_select(2, columns),
                 layer.values[row:row + 1].index_select(2, columns)) for layer in self._layers()]


def stack_left_padded(rows: list[list[tuple[Any, Any]]], lengths: list[int], device: Any
                      ) -> tuple[list[tuple[Any, Any]], Any]:
    """One batch of per-row KV runs (each [1, H, lengths[i], D] per layer; ``[]`` for a row of
    length 0), left-padded with zeros to the longest: per layer (keys, values) [B, H, T, D],
    and the [B, T] mask. Needs one row of length > 0."""
    import torch

    longest = max(lengths)
    mask = torch.zeros((len(rows), longest), dtype=torch.long, device=device)
    for i, n in enumerate(lengths):
        mask[i, longest - n:] = 1
    some = next(r for r, n in zip(rows, lengths, strict=True) if n)
    layers: list[tuple[Any, Any]] = []
    for layer, (k0, v0) in enumerate(some):
        kz = k0.new_zeros(*k0.shape[:2], longest, k0.shape[3])
        vz = v0.new_zeros(*v0.shape[:2], longest, v0.shape[3])
        keys, values = [], []
        for r, n in zip(rows, lengths, strict=True):
            k, v = r[layer] if n else (kz[:, :, :0], vz[:, :, :0])
            pad = longest - n
            keys.append(torch.cat([kz[:, :, :pad], k], dim=2) if pad else k)
            values.append(torch.cat([vz[:, :, :pad], v], dim=2) if pad else v)
        layers.append((torch.cat(keys, dim=0), torch.cat(values, dim=0)))
    return layers, mask
