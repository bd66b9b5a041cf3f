"""Collecting per-batch probe inputs: fixed-size chunks of a sequence, and per-layer tensors of several
batches concatenated with their word axes padded to the longest."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch


def chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in consecutive lists of ``size`` (the last may be shorter)."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


def pad_cat(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """Concatenate along the batch, zero-padding every trailing word axis to the longest.

    Shapes:
        parts: states ``(b_k, w_k, d)`` (3-D), or attention maps ``(b_k, h, w_k, w_k)`` (4-D); out
        ``(sum b_k, w, d)`` or ``(sum b_k, h, w, w)`` with ``w = max w_k``.
    """
    size = max(p.shape[-2] for p in parts)
    padded = []
    for p in parts:
        extra = size - p.shape[-2]
        pad = (0, 0, 0, extra) if p.dim() == 3 else (0, extra, 0, extra)
        padded.append(torch.nn.functional.pad(p, pad))
    return torch.cat(padded)
