"""Small helpers shared inside the structures package."""

from __future__ import annotations

import torch


def distance_dtype(n: int) -> torch.dtype:
    """Smallest integer dtype that holds every hop count (and -1) for ``n`` tokens."""
    return torch.int16 if n <= torch.iinfo(torch.int16).max else torch.int32
