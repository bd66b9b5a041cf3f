"""Absolute position encodings added to the token embeddings (or none, for structure-only models)."""

from __future__ import annotations

import math

import torch
from torch import nn

POSITION_KINDS = ("sinusoidal", "learned", "none")


class SinusoidalPositions(nn.Module):
    """Fixed sine/cosine encodings (Vaswani et al., 2017, section 3.5):
    ``PE[p, 2k] = sin(p / 10000^(2k/d))``, ``PE[p, 2k+1] = cos(p / 10000^(2k/d))``.

    Shapes:
        forward(n) -> (n, d_model)
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", self._table(64), persistent=False)

    def _table(self, n: int) -> torch.Tensor:
        position = torch.arange(n, dtype=torch.float64)[:, None]
        rate = torch.exp(-math.log(10000.0) * torch.arange(0, self.d_model, 2, dtype=torch.float64) / self.d_model)
        table = torch.zeros(n, self.d_model, dtype=torch.float64)
        table[:, 0::2] = torch.sin(position * rate)
        table[:, 1::2] = torch.cos(position * rate)[:, : self.d_model // 2]
        return table.float()

    def forward(self, n: int) -> torch.Tensor:
        if n > self.table.shape[0]:
            self.table = self._table(max(n, 2 * self.table.shape[0])).to(self.table.device)
        return self.table[:n]


class LearnedPositions(nn.Module):
    """One trained vector per position up to ``max_len``.

    Shapes:
        forward(n) -> (n, d_model)
    """

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, n: int) -> torch.Tensor:
        if n > self.max_len:
            raise ValueError(f"learned positions cover {self.max_len} tokens, the batch has {n}; raise max_len")
        return self.table[:n]


def make_positions(kind: str, d_model: int, max_len: int) -> nn.Module | None:
    """The position module for ``kind`` (``None`` for ``"none"``)."""
    if kind == "sinusoidal":
        return SinusoidalPositions(d_model)
    if kind == "learned":
        return LearnedPositions(d_model, max_len)
    if kind == "none":
        return None
    raise ValueError(f"unknown positions {kind!r}; known: {', '.join(POSITION_KINDS)}")
