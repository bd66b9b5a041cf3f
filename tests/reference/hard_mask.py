"""Naive float64 oracle for ``hard_mask``: masked heads attend to real keys with ``0 <= dist_ij <= radius``,
the other heads to every real key; a query with no allowed key outputs zeros."""

from __future__ import annotations

import torch

from tests.reference.full import attention_per_query


def hard_mask_reference(
    radius: int, masked_heads: list[int], q, k, v, distance: torch.Tensor, token_mask: torch.Tensor
):
    """distance ``(b, n, n)``, token_mask ``(b, n)``."""
    b, h, n, _ = q.shape
    allowed = torch.zeros(b, h, n, n, dtype=torch.bool)
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                for j in range(n):
                    real = bool(token_mask[bi, i]) and bool(token_mask[bi, j])
                    near = 0 <= int(distance[bi, i, j]) <= radius
                    allowed[bi, hi, i, j] = real and (near or hi not in masked_heads)
    return attention_per_query(q, k, v, allowed)
