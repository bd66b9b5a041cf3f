"""``fixed_decay``: a fixed, non-learnable linear distance penalty on the scores."""

from __future__ import annotations

import torch

from structattn.attention import bucket_bias as bb
from structattn.attention.base import register_attention
from structattn.attention.biased import BiasedAttention
from structattn.attention.soft_bias import distance_buckets
from structattn.structures.structure import Structure


@register_attention("fixed_decay")
class FixedDecayAttention(BiasedAttention):
    """``score_ij = q_i . k_j / sqrt(d) - alpha * min(dist_ij, max_distance)``; an unreachable real pair
    (distance -1) gets the fixed penalty ``alpha * (max_distance + 1)``. Softmax over real keys.

    The counterpart of ``soft_bias`` for the learnable-vs-fixed decay ablation: the same buckets, with the
    table fixed to ``-alpha * [0, 1, ..., max_distance, max_distance + 1]``. ``alpha`` is a buffer, so the
    module has no parameters, and :meth:`learned_quantities` reports nothing (the table is fixed by ``alpha``).
    Padded keys stay masked; padded query rows output zeros. A :class:`~structattn.attention.biased.BiasedAttention`
    on the bucket-table fast path (:meth:`bucket_bias`).

    Args:
        num_heads: h.
        head_dim: d.
        alpha: penalty per hop (>= 0).
        max_distance: distances beyond it are penalised as ``max_distance``.
        backend: ``"sdpa"`` (fused float mask), ``"flex"`` (FlexAttention; CPU inference only) or ``"naive"``.

    Shapes:
        q, k, v ``(b, h, n, d)`` -> out ``(b, h, n, d)``, weights ``(b, h, n, n)``.
    """

    requires = frozenset({"distance"})

    def __init__(
        self, num_heads: int, head_dim: int, alpha: float = 1.0, max_distance: int = 10, backend: str = "sdpa"
    ) -> None:
        super().__init__(num_heads, head_dim)
        if alpha < 0 or max_distance < 1:
            raise ValueError(
                f"fixed_decay: need alpha >= 0 and max_distance >= 1, got alpha={alpha}, max_distance={max_distance}"
            )
        self.max_distance, self.backend = max_distance, self.check_backend(backend)
        self.register_buffer("alpha", torch.tensor(float(alpha)))

    def penalty_table(self) -> torch.Tensor:
        """``-alpha * [0, ..., max_distance, max_distance + 1]`` (the last entry: unreachable), ``(K)``."""
        return -self.alpha * torch.arange(self.max_distance + 2, dtype=self.alpha.dtype, device=self.alpha.device)

    def bucket_bias(
        self, structure: Structure, batch_size: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fast path of :class:`BiasedAttention`: ``(penalty table, bucket codes (b, n, n))``."""
        index, _ = distance_buckets(structure, batch_size, device, list(range(self.max_distance + 1)))
        return self.penalty_table().to(device), index

    def bias(
        self, structure: Structure, batch_size: int, num_heads: int, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor:
        """``-alpha * min(dist, max_distance)`` (``-alpha * (max_distance + 1)`` unreachable), ``(b, 1, n, n)``."""
        table, index = self.bucket_bias(structure, batch_size, device)
        return bb.gather_bias(bb.extend_table(table, 0.0, dtype), index)

    def extra_repr(self) -> str:
        return f"alpha={float(self.alpha)}, max_distance={self.max_distance}, backend={self.backend!r}"
