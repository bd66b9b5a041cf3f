"""Key/value cache of an incremental decoder: one entry per layer."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    """Cached keys and values of one decoder layer.

    Attributes:
        self_k, self_v: (b, h, t, d), the keys and values of the ``t`` target tokens decoded so far.
        cross_k, cross_v: (b, h, n, d), the projected encoder memory (computed once per source).
    """

    self_k: torch.Tensor | None = None
    self_v: torch.Tensor | None = None
    cross_k: torch.Tensor | None = None
    cross_v: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (beam search: each surviving hypothesis takes its parent's cache)."""
        for name in ("self_k", "self_v", "cross_k", "cross_v"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.index_select(0, index))


@dataclass
class DecoderCache:
    """Per-layer caches plus the number of target tokens already decoded (the next token's position)."""

    layers: list[LayerCache] = field(default_factory=list)
    length: int = 0

    @classmethod
    def empty(cls, num_layers: int) -> "DecoderCache":
        return cls([LayerCache() for _ in range(num_layers)], 0)

    def reorder(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder(index)
