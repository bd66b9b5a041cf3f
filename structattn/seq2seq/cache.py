"""Key/value cache of an incremental decoder: one entry per layer.

Two kinds of rows: the self-attention keys/values have one row per hypothesis (``B``); the cross-attention
keys/values have one row per *source* (``M``) when the hypotheses come in equal groups of ``B / M`` consecutive
rows per source (beam search), so the encoder memory is projected once per sentence and never copied per beam.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    """Cached keys and values of one decoder layer.

    Attributes:
        self_k, self_v: (B, t, h, d), the keys and values of the ``t`` target tokens decoded so far, in their
            rows before ``self_rows``. Time before heads: a row's cached tokens are one contiguous block, so a
            beam reorder copies whole blocks (about twice as fast as the head-major (B, h, t, d) layout); attention
            reads them through a transposed view.
        self_rows: (B',) a reorder of ``self_k``/``self_v`` not applied yet (``None``: none); :meth:`append`
            applies it in the same copy that appends the new tokens, so a beam step copies the cache once.
        cross_k, cross_v: (M, h, n, d), the projected encoder memory (computed once per source); ``M`` divides
            ``B`` and hypothesis row ``r`` reads memory row ``r // (B / M)``.
    """

    self_k: torch.Tensor | None = None
    self_v: torch.Tensor | None = None
    cross_k: torch.Tensor | None = None
    cross_v: torch.Tensor | None = None
    self_rows: torch.Tensor | None = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Put the new tokens' keys and values (B, s, h, d) after the cached ones (reordered first, if pending);
        returns all of them, (B, t + s, h, d) each."""
        self.self_k, self.self_v = _extend(self.self_k, self.self_rows, k), _extend(self.self_v, self.self_rows, v)
        self.self_rows = None
        return self.self_k, self.self_v

    def reorder_target(self, index: torch.Tensor) -> None:
        """Keep hypothesis rows ``index`` (B',) of the self-attention cache (each survivor takes its parent's);
        applied lazily by the next :meth:`append`."""
        if self.self_k is not None:
            self.self_rows = index if self.self_rows is None else self.self_rows.index_select(0, index)

    def reorder_memory(self, index: torch.Tensor) -> None:
        """Keep memory rows ``index`` (M',) of the cross-attention cache."""
        if self.cross_k is not None:
            self.cross_k, self.cross_v = self.cross_k.index_select(0, index), self.cross_v.index_select(0, index)


@dataclass
class DecoderCache:
    """Per-layer caches plus the number of target tokens already decoded (the next token's position)."""

    layers: list[LayerCache] = field(default_factory=list)
    length: int = 0

    @classmethod
    def empty(cls, num_layers: int) -> "DecoderCache":
        return cls([LayerCache() for _ in range(num_layers)], 0)

    def reorder_target(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder_target(index)

    def reorder_memory(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder_memory(index)


def _extend(past: torch.Tensor | None, rows: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    """``cat([past[rows], new], dim=1)`` with one copy of ``past``. Shapes: past (B, t, h, d), new (B', s, h, d)."""
    if past is None:
        return new.contiguous()
    if rows is None:
        return torch.cat([past, new], dim=1)
    if torch.is_grad_enabled() and (past.requires_grad or new.requires_grad):  # out= does not record gradients
        return torch.cat([past.index_select(0, rows), new], dim=1)
    t = past.shape[1]
    out = new.new_empty(new.shape[0], t + new.shape[1], *new.shape[2:])
    torch.index_select(past, 0, rows, out=out[:, :t])
    out[:, t:] = new
    return out
