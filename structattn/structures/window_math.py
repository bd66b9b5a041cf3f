"""Dense distances of a sliding window (+ global tokens), built on request from the compact form."""

from __future__ import annotations

import torch

from structattn.structures._util import distance_dtype


def band_distance(
    token_mask: torch.Tensor, radius: int, dilation: int = 1, is_global: torch.Tensor | None = None
) -> torch.Tensor:
    """Window distances.

    ``distance[i, j] = |i - j|`` when ``|i - j| <= radius * dilation`` and ``|i - j|`` is a multiple of
    ``dilation``; ``1`` between a global token and any other real token (a global token reaches and is reached
    by every token in one hop); ``-1`` elsewhere and on padding.

    Shapes:
        token_mask: ``(n)`` or ``(b, n)``; is_global: same; returns ``(n, n)`` or ``(b, n, n)``.
    """
    n = token_mask.shape[-1]
    pos = torch.arange(n, device=token_mask.device)
    offset = (pos[:, None] - pos[None, :]).abs()  # (i, j)
    inside = (offset <= radius * dilation) & (offset % dilation == 0)
    dist = torch.where(inside, offset, torch.full_like(offset, -1))
    dist = dist.expand(*token_mask.shape[:-1], n, n).clone()
    if is_global is not None:
        touches_global = is_global[..., :, None] | is_global[..., None, :]
        dist = torch.where(touches_global & (offset > 0), torch.ones_like(dist), dist)
    real = token_mask[..., :, None] & token_mask[..., None, :]
    dist = torch.where(real, dist, torch.full_like(dist, -1))
    return dist.to(distance_dtype(n))
