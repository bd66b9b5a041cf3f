"""Learning-rate schedule: linear warmup, then inverse-square-root decay (Vaswani et al., 2017)."""

from __future__ import annotations

import math

import torch


def warmup_inverse_sqrt(step: int, warmup_steps: int) -> float:
    """Multiplier of the peak learning rate at 0-based ``step``.

    With ``s = step + 1`` and ``w = max(warmup_steps, 1)``: ``s / w`` while ``s < w``, then ``sqrt(w / s)``;
    the peak (1.0) is reached at ``s = w`` and the two pieces meet there.
    """
    s, w = step + 1, max(warmup_steps, 1)
    return s / w if s < w else math.sqrt(w / s)


def make_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` applying :func:`warmup_inverse_sqrt` (call ``scheduler.step()`` after every update)."""
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_inverse_sqrt(step, warmup_steps))
