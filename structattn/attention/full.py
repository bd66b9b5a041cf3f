"""``full``: plain scaled dot-product attention with key padding (the baseline)."""

from __future__ import annotations

import torch

from structattn.attention.masking import naive_attention, sdpa, sdpa_allowed
from structattn.attention.base import StructuredAttention, key_padding, register_attention
from structattn.structures.structure import Structure


@register_attention("full")
class FullAttention(StructuredAttention):
    """Every real token attends to every real token (Vaswani et al. 2017, eq. 1):
    ``out_i = sum_j softmax_j(q_i . k_j / sqrt(d)) v_j`` over real keys ``j``.

    Reads only ``structure.token_mask`` (``structure=None`` means no padding). The fast path is
    ``scaled_dot_product_attention`` with a boolean key mask; the eager path runs only when weights are
    requested. Padded query rows output zeros (and all-zero weight rows).

    Args:
        num_heads: h.
        head_dim: d.

    Shapes:
        q, k, v ``(b, h, n, d)`` -> out ``(b, h, n, d)``, weights ``(b, h, n, n)``.
    """

    requires = frozenset()

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
        b, _, n, _ = q.shape
        token_mask = key_padding(structure, b, n, q.device)  # (b, n)
        if return_weights:
            allowed = (token_mask[:, :, None] & token_mask[:, None, :])[:, None]  # (b, 1, n, n)
            return naive_attention(q, k, v, allowed=allowed)
        if structure is None or (q.device.type == "cpu" and bool(token_mask.all())):
            return sdpa(q, k, v), None
        return sdpa_allowed(q, k, v, token_mask[:, None, None, :]), None
