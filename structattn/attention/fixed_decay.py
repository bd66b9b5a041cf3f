"""``fixed_decay``: a fixed, non-learnable linear distance penalty on the scores."""

from __future__ import annotations

import torch

from structattn.attention import functional as fn
from structattn.attention.base import StructuredAttention, register_attention
from structattn.attention.soft_bias import BACKENDS, distance_buckets
from structattn.structures.structure import Structure


@register_attention("fixed_decay")
class FixedDecayAttention(StructuredAttention):
    """``score_ij = q_i . k_j / sqrt(d) - alpha * min(dist_ij, max_distance)``; an unreachable real pair
    (distance -1) gets the fixed penalty ``alpha * (max_distance + 1)``. Softmax over real keys.

    The counterpart of ``soft_bias`` for the learnable-vs-fixed decay ablation: the same buckets, with the
    table fixed to ``-alpha * [0, 1, ..., max_distance, max_distance + 1]``. ``alpha`` is a buffer, so the
    module has no parameters. Padded keys stay masked; padded query rows output zeros.

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
        if backend not in BACKENDS:
            raise ValueError(f"fixed_decay: backend must be one of {BACKENDS}, got {backend!r}")
        self.max_distance, self.backend = max_distance, backend
        self.register_buffer("alpha", torch.tensor(float(alpha)))

    def penalty_table(self) -> torch.Tensor:
        """``-alpha * [0, ..., max_distance, max_distance + 1]`` (the last entry: unreachable), ``(K)``."""
        return -self.alpha * torch.arange(self.max_distance + 2, dtype=self.alpha.dtype, device=self.alpha.device)

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        structure: Structure | None,
        *,
        hidden: torch.Tensor | None,
        return_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        assert structure is not None  # guaranteed by requires
        index, token_mask = distance_buckets(structure, q.shape[0], q.device, list(range(self.max_distance + 1)))
        table = self.penalty_table().to(q.device)
        return fn.table_bias_attention(q, k, v, table, index, token_mask, self.backend, return_weights)

    def extra_repr(self) -> str:
        return f"alpha={float(self.alpha)}, max_distance={self.max_distance}, backend={self.backend!r}"
