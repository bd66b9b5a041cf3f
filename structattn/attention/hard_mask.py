"""``hard_mask``: attend only to tokens within a structural radius."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from structattn.attention.base import key_padding, register_attention
from structattn.attention.biased import BiasedAttention
from structattn.structures.structure import Structure


@register_attention("hard_mask")
class HardMaskAttention(BiasedAttention):
    """Attention restricted to ``0 <= dist_ij <= radius`` (radius 1: the token itself and its tree
    neighbours); unreachable pairs and padding are never allowed. Optionally only ``masked_heads`` are
    restricted and the other heads attend to every real token, as ``full`` does.

    A query row with no allowed key (a padded query; a real token whose own distance is not 0) outputs a
    zero vector and an all-zero weight row. A :class:`~structattn.attention.biased.BiasedAttention` with only
    an :meth:`allowed` mask (a ``-inf`` bias elsewhere): fused SDPA with a boolean mask, eager with the weights.

    Args:
        num_heads: h.
        head_dim: d.
        radius: largest allowed distance (>= 0).
        masked_heads: indices of the restricted heads (default: all).

    Shapes:
        q, k, v ``(b, h, n, d)`` -> out ``(b, h, n, d)``, weights ``(b, h, n, n)``.
    """

    requires = frozenset({"distance"})

    def __init__(
        self, num_heads: int, head_dim: int, radius: int = 1, masked_heads: Sequence[int] | None = None
    ) -> None:
        super().__init__(num_heads, head_dim)
        if radius < 0:
            raise ValueError(f"hard_mask: radius must be >= 0, got {radius}")
        heads = list(range(num_heads)) if masked_heads is None else [int(x) for x in masked_heads]
        bad = [x for x in heads if not 0 <= x < num_heads]
        if bad or len(set(heads)) != len(heads):
            raise ValueError(
                f"hard_mask: masked_heads {heads} must be distinct head indices in [0, {num_heads}); bad: {bad}"
            )
        self.radius, self.backend = radius, "sdpa"
        is_masked = torch.zeros(num_heads, dtype=torch.bool)
        is_masked[heads] = True
        self.register_buffer("is_masked_head", is_masked, persistent=False)

    def allowed(self, structure: Structure, batch_size: int, device: torch.device) -> torch.Tensor:
        """Bool ``(b, 1, n, n)`` (every head masked) or ``(b, h, n, n)``: where each query may attend."""
        distance = structure.dense_distance().to(device)
        n = distance.shape[-1]
        token_mask = key_padding(structure, batch_size, n, device)
        near = ((distance >= 0) & (distance <= self.radius)).expand(batch_size, n, n)
        near = near & token_mask[:, :, None] & token_mask[:, None, :]
        if bool(self.is_masked_head.all()):
            return near[:, None]
        free = (token_mask[:, :, None] & token_mask[:, None, :])[:, None]
        return torch.where(self.is_masked_head.to(device)[None, :, None, None], near[:, None], free)

    def extra_repr(self) -> str:
        return f"radius={self.radius}, masked_heads={self.is_masked_head.nonzero().flatten().tolist()}"
